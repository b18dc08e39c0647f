#include "RecordOptions.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <regex>

namespace mneme::launcher {
namespace {

struct Flag {
  const char *Short; // nullptr: none
  const char *Long;
  bool TakesValue;
};

// As typer declares them in mneme_cc/cli/typer_app.py.
const Flag Flags[] = {
    {"-rdb", "--rdb", true},      {nullptr, "--kernels", true},
    {nullptr, "--skip", true},    {nullptr, "--max-instances", true},
    {nullptr, "--vass", true},    {nullptr, "--va-base", true},
    {nullptr, "--ranks", true},   {nullptr, "--chunk-size", true},
    {nullptr, "--zstd-level", true}, {"-v", "--verbose", false},
};

std::string trimmed(const std::string &S) {
  size_t B = S.find_first_not_of(" \t"), E = S.find_last_not_of(" \t");
  return B == std::string::npos ? "" : S.substr(B, E - B + 1);
}

// "64G", "512M", "1 GiB", "1048576" -> bytes.
bool parseSize(const std::string &Text, uint64_t &Out) {
  static const std::regex Size(R"(^(\d+)\s*([kKmMgGtT]?)(i?B)?$)");
  std::smatch M;
  std::string T = trimmed(Text);
  if (!std::regex_match(T, M, Size))
    return false;
  errno = 0;
  unsigned long long V = std::strtoull(M[1].str().c_str(), nullptr, 10);
  int Shift = std::string("_kmgt").find(M[2].length() ? std::tolower(M[2].str()[0]) : '_') * 10;
  // Too large to count: the caller's range check says what is wrong with it.
  Out = errno == ERANGE || V > (~0ULL >> Shift) ? ~0ULL : V << Shift;
  return true;
}

bool parseWhole(const std::string &Text, uint64_t &Out, int Base = 10) {
  std::string T = trimmed(Text);
  if (T.empty() || T[0] == '-' || T[0] == '+')
    return false;
  char *End = nullptr;
  errno = 0;
  Out = std::strtoull(T.c_str(), &End, Base);
  return errno == 0 && *End == '\0';
}

bool isRankList(const std::string &Text) {
  static const std::regex Ranks(R"(^\d+(-\d+)?(,\d+(-\d+)?)*$)");
  if (!std::regex_match(Text, Ranks))
    return false;
  size_t At = 0;
  while (At <= Text.size()) {
    size_t Comma = Text.find(',', At);
    std::string Range = Text.substr(At, Comma == std::string::npos ? std::string::npos
                                                                   : Comma - At);
    size_t Dash = Range.find('-');
    if (Dash != std::string::npos &&
        std::stoull(Range.substr(0, Dash)) > std::stoull(Range.substr(Dash + 1)))
      return false;
    if (Comma == std::string::npos)
      break;
    At = Comma + 1;
  }
  return true;
}

bool set(RecordOptions &O, const std::string &Name, const std::string &Value,
         std::string &Error) {
  uint64_t N = 0;
  auto Bad = [&](const std::string &Why) {
    Error = Name + " '" + Value + "' " + Why;
    return false;
  };
  if (Name == "--rdb") {
    O.Database = Value;
  } else if (Name == "--kernels") {
    try {
      std::regex Checked(Value, std::regex::ECMAScript);
    } catch (const std::regex_error &E) {
      return Bad(std::string("is not a regex the recorder reads (ECMAScript): ") + E.what());
    }
    O.Kernels = Value;
  } else if (Name == "--skip" || Name == "--max-instances") {
    if (!parseWhole(Value, N))
      return Bad("is not a whole number");
    (Name == "--skip" ? O.Skip : O.MaxInstances) = N;
  } else if (Name == "--vass") {
    if (!parseSize(Value, N))
      return Bad("is not a size (e.g. 64G, 512M)");
    if (N == 0 || N >= (1ULL << 63))
      return Bad("is not a size of virtual address space (more than 0, less than 2^63 "
                 "bytes)");
    O.VASize = N;
  } else if (Name == "--va-base") {
    if (!parseWhole(Value, N, 0))
      return Bad("is not an address (e.g. 0x200000000000)");
    if (N == 0 || N % (2 << 20) || N >= (1ULL << 47))
      return Bad("is not a user-space address that is a multiple of 2 MiB");
    O.VABase = N;
  } else if (Name == "--ranks") {
    if (!isRankList(Value))
      return Bad("is not a rank list (e.g. 0,2-3)");
    O.Ranks = Value;
  } else if (Name == "--chunk-size") {
    if (!parseSize(Value, N))
      return Bad("is not a size (e.g. 64G, 512M)");
    if (N < 4096 || N % 8)
      return Bad("is not a chunk size: a multiple of 8, at least 4096");
    O.ChunkSize = N;
  } else if (Name == "--zstd-level") {
    if (!parseWhole(Value, N) || N > 19)
      return Bad("is not a zstd level (0, raw, to 19)");
    O.ZstdLevel = static_cast<int>(N);
  }
  return true;
}

} // namespace

const std::vector<std::string> &recordFlags() {
  static const std::vector<std::string> Names = [] {
    std::vector<std::string> V;
    for (const Flag &F : Flags) {
      if (F.Short)
        V.push_back(F.Short);
      V.push_back(F.Long);
    }
    return V;
  }();
  return Names;
}

bool parseRecordOptions(const std::vector<std::string> &Args, RecordOptions &O,
                        std::string &Error) {
  bool HaveDatabase = false;
  size_t I = 0;
  for (; I < Args.size(); ++I) {
    const std::string &A = Args[I];
    if (A == "--") {
      ++I;
      break;
    }
    if (A.empty() || A[0] != '-')
      break; // the application starts here
    std::string Name = A, Value;
    bool Inline = false;
    if (size_t Eq = A.find('='); Eq != std::string::npos) {
      Name = A.substr(0, Eq);
      Value = A.substr(Eq + 1);
      Inline = true;
    }
    const Flag *Found = nullptr;
    for (const Flag &F : Flags)
      if (Name == F.Long || (F.Short && Name == F.Short))
        Found = &F;
    if (!Found) {
      Error = "no option " + A + " (mneme record --help lists them; the application goes "
              "after --)";
      return false;
    }
    Name = Found->Long;
    if (!Found->TakesValue) {
      if (Inline) {
        Error = Name + " takes no value";
        return false;
      }
      O.Verbose = true;
      continue;
    }
    if (!Inline) {
      if (I + 1 >= Args.size() || Args[I + 1] == "--") {
        Error = Name + " needs a value";
        return false;
      }
      Value = Args[++I];
    }
    if (!set(O, Name, Value, Error))
      return false;
    HaveDatabase |= Name == "--rdb";
  }
  O.Command.assign(Args.begin() + I, Args.end());
  if (!HaveDatabase || O.Database.empty()) {
    Error = "no record database given: mneme record -rdb DIR -- APP [ARGS...]";
    return false;
  }
  if (O.MaxInstances < 1) {
    Error = "--max-instances must be at least 1";
    return false;
  }
  if (O.Command.empty()) {
    Error = "no application given: mneme record -rdb DIR -- APP [ARGS...]";
    return false;
  }
  return true;
}

const std::vector<const char *> &recorderVariables() {
  static const std::vector<const char *> Names = {
      "MNEME_RDB",   "MNEME_KERNELS", "MNEME_SKIP",       "MNEME_MAX_INSTANCES",
      "MNEME_VASS",  "MNEME_VA_BASE", "MNEME_RANKS",      "MNEME_CHUNK_SIZE",
      "MNEME_ZSTD_LEVEL", "MNEME_VERBOSE"};
  return Names;
}

std::vector<std::pair<std::string, std::string>> RecordOptions::environment() const {
  std::vector<std::pair<std::string, std::string>> V;
  V.emplace_back("MNEME_SKIP", std::to_string(Skip));
  V.emplace_back("MNEME_MAX_INSTANCES", std::to_string(MaxInstances));
  if (Kernels)
    V.emplace_back("MNEME_KERNELS", *Kernels);
  if (VASize)
    V.emplace_back("MNEME_VASS", std::to_string(*VASize));
  if (VABase) {
    char Hex[32];
    std::snprintf(Hex, sizeof Hex, "0x%llx", static_cast<unsigned long long>(*VABase));
    V.emplace_back("MNEME_VA_BASE", Hex);
  }
  if (Ranks)
    V.emplace_back("MNEME_RANKS", *Ranks);
  if (ChunkSize)
    V.emplace_back("MNEME_CHUNK_SIZE", std::to_string(*ChunkSize));
  if (ZstdLevel)
    V.emplace_back("MNEME_ZSTD_LEVEL", std::to_string(*ZstdLevel));
  if (Verbose)
    V.emplace_back("MNEME_VERBOSE", "1");
  return V;
}

} // namespace mneme::launcher
