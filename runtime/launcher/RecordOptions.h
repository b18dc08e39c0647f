// `mneme record`'s options, parsed from its command line by the native
// launcher (the flags `mneme record --help` lists; docs/record.md).
#ifndef MNEME_LAUNCHER_RECORD_OPTIONS_H
#define MNEME_LAUNCHER_RECORD_OPTIONS_H

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mneme::launcher {

struct RecordOptions {
  std::string Database;                    // -rdb DIR
  std::optional<std::string> Kernels;      // --kernels REGEX
  uint64_t Skip = 0;                       // --skip N
  uint64_t MaxInstances = 4;               // --max-instances M
  std::optional<uint64_t> VASize;          // --vass SIZE
  std::optional<uint64_t> VABase;          // --va-base ADDRESS
  std::optional<std::string> Ranks;        // --ranks LIST
  std::optional<uint64_t> ChunkSize;       // --chunk-size SIZE
  std::optional<int> ZstdLevel;            // --zstd-level L
  bool Verbose = false;                    // -v
  std::vector<std::string> Command;        // APP [ARGS...], after --

  // The MNEME_* variables the recorder reads (runtime/recorder/Options.cpp).
  std::vector<std::pair<std::string, std::string>> environment() const;
};

// Parses and checks argv (without the program name). On a bad command line
// returns false with Error saying what is wrong and what to do.
bool parseRecordOptions(const std::vector<std::string> &Args, RecordOptions &Out,
                        std::string &Error);

// The names of every variable the recorder reads (MNEME_RDB and those
// environment() may set).
const std::vector<const char *> &recorderVariables();

// Every flag the parser takes (the CLI's tests compare them with typer's).
const std::vector<std::string> &recordFlags();

} // namespace mneme::launcher

#endif
