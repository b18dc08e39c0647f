// The recorder's settings, read once from MNEME_* variables (which
// `mneme record` sets from its flags; docs/record.md lists them).
#ifndef MNEME_RECORDER_OPTIONS_H
#define MNEME_RECORDER_OPTIONS_H

#include <cstdint>
#include <string>
#include <vector>

namespace mneme::recorder {

struct Options {
  std::string Database;           // MNEME_RDB; empty: pass everything through
  std::string KernelRegex;        // MNEME_KERNELS (ECMAScript); empty: all
  uint64_t Skip = 0;              // MNEME_SKIP launches per kernel
  uint64_t MaxInstances = 4;      // MNEME_MAX_INSTANCES per kernel
  uint64_t VASize = 0;            // MNEME_VASS bytes; 0: twice the device memory
  uint64_t VABase = 0x200000000000ULL; // MNEME_VA_BASE
  bool VABaseGiven = false;
  uint64_t ChunkSize = 1 << 20;   // MNEME_CHUNK_SIZE
  int ZstdLevel = 1;              // MNEME_ZSTD_LEVEL (0: store raw)
  int Rank = -1;                  // from the launcher's variables; -1: none
  std::string RankSelection;      // MNEME_RANKS, e.g. "0,2-3"; empty: all
  bool Verbose = false;           // MNEME_VERBOSE
  double LaunchedAt = 0;          // MNEME_LAUNCHED_NS: the launcher's fork, steady clock
  std::vector<std::string> Errors; // settings that could not be parsed

  bool recordsThisRank() const;
};

const Options &options();

// Writes "mneme: <Message>" to stderr (the application's stdout is left alone).
void report(const std::string &Message);

} // namespace mneme::recorder

#endif
