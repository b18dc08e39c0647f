#include "Options.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace mneme::recorder {
namespace {

const char *env(const char *Name) {
  const char *V = std::getenv(Name);
  return V && *V ? V : nullptr;
}

// "64G", "512m", "1048576", "0x..." -> bytes.
bool parseSize(const char *Text, uint64_t &Out) {
  char *End = nullptr;
  unsigned long long V = std::strtoull(Text, &End, 0);
  if (End == Text)
    return false;
  uint64_t Scale = 1;
  switch (*End) {
  case 'k': case 'K': Scale = 1ULL << 10; ++End; break;
  case 'm': case 'M': Scale = 1ULL << 20; ++End; break;
  case 'g': case 'G': Scale = 1ULL << 30; ++End; break;
  case 't': case 'T': Scale = 1ULL << 40; ++End; break;
  default: break;
  }
  if (*End == 'i' || *End == 'B')
    ++End;
  if (*End == 'B')
    ++End;
  if (*End != '\0')
    return false;
  Out = V * Scale;
  return true;
}

void readSize(Options &O, const char *Name, uint64_t &Field) {
  if (const char *V = env(Name)) {
    if (!parseSize(V, Field))
      O.Errors.push_back(std::string(Name) + "=" + V + " is not a size (e.g. 64G)");
  }
}

// The rank the usual MPI and batch launchers give this process.
int detectRank() {
  for (const char *Name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                           "MV2_COMM_WORLD_RANK", "SLURM_PROCID", "RANK"})
    if (const char *V = env(Name))
      return std::atoi(V);
  return -1;
}

Options load() {
  Options O;
  if (const char *V = env("MNEME_RDB"))
    O.Database = V;
  if (const char *V = env("MNEME_KERNELS"))
    O.KernelRegex = V;
  readSize(O, "MNEME_SKIP", O.Skip);
  readSize(O, "MNEME_MAX_INSTANCES", O.MaxInstances);
  readSize(O, "MNEME_VASS", O.VASize);
  readSize(O, "MNEME_CHUNK_SIZE", O.ChunkSize);
  if (env("MNEME_VA_BASE")) {
    readSize(O, "MNEME_VA_BASE", O.VABase);
    O.VABaseGiven = true;
  }
  if (const char *V = env("MNEME_ZSTD_LEVEL"))
    O.ZstdLevel = std::atoi(V);
  if (const char *V = env("MNEME_RANKS"))
    O.RankSelection = V;
  O.Verbose = env("MNEME_VERBOSE") != nullptr;
  if (const char *V = env("MNEME_LAUNCHED_NS"))
    O.LaunchedAt = std::strtoull(V, nullptr, 10) / 1e9;
  O.Rank = detectRank();
  // The store's bound on a chunk, which also keeps a chunk's hash pieces
  // within a grid's dimension.
  if (O.ChunkSize < 4096 || O.ChunkSize % 8 || O.ChunkSize > (1ULL << 30)) {
    O.Errors.push_back("MNEME_CHUNK_SIZE must be a multiple of 8, from 4096 to 1 GiB");
    O.ChunkSize = 1 << 20;
  }
  return O;
}

} // namespace

bool Options::recordsThisRank() const {
  if (RankSelection.empty() || Rank < 0)
    return true;
  // A comma list of ranks and ranges: "0,2-3".
  const char *P = RankSelection.c_str();
  while (*P) {
    char *End;
    long Lo = std::strtol(P, &End, 10), Hi = Lo;
    if (*End == '-')
      Hi = std::strtol(End + 1, &End, 10);
    if (Rank >= Lo && Rank <= Hi)
      return true;
    P = *End == ',' ? End + 1 : End;
    if (*End != ',' && *End != '\0')
      break;
  }
  return false;
}

const Options &options() {
  // Never destroyed: the recorder still reads it while the process exits.
  static const Options *O = new Options(load());
  return *O;
}

void report(const std::string &Message) {
  std::fprintf(stderr, "mneme: %s\n", Message.c_str());
}

} // namespace mneme::recorder
