#include "RecordOptions.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <climits>
#include <cstdint>
#include <regex>
#include <string>

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

bool isDigit(char C) { return C >= '0' && C <= '9'; }

// Digits at Text[At...] as a number (saturating); At moves past them. False
// when there is no digit.
bool digits(const std::string &Text, size_t &At, uint64_t &Out) {
  size_t Start = At;
  Out = 0;
  for (; At < Text.size() && isDigit(Text[At]); ++At)
    Out = Out > (~0ULL - 9) / 10 ? ~0ULL : Out * 10 + (Text[At] - '0');
  return At > Start;
}

// "64G", "512M", "1 GiB", "1048576" -> bytes (by hand: std::regex recurses
// per character, and a value may be long).
bool parseSize(const std::string &Text, uint64_t &Out) {
  std::string T = trimmed(Text);
  size_t At = 0;
  uint64_t V = 0;
  if (!digits(T, At, V))
    return false;
  while (At < T.size() && (T[At] == ' ' || T[At] == '\t'))
    ++At;
  int Shift = 0;
  if (At < T.size()) {
    size_t Unit = std::string("kmgt").find(static_cast<char>(std::tolower(T[At])));
    if (Unit != std::string::npos) {
      Shift = 10 * (static_cast<int>(Unit) + 1);
      ++At;
    }
  }
  std::string Rest = T.substr(At);
  if (!(Rest.empty() || Rest == "B" || Rest == "iB"))
    return false;
  // Too large to count: the caller's range check says what is wrong with it.
  Out = V > (~0ULL >> Shift) ? ~0ULL : V << Shift;
  return true;
}

// A whole number: decimal digits, or hexadecimal after 0x when Hex.
bool parseWhole(const std::string &Text, uint64_t &Out, bool Hex = false) {
  std::string T = trimmed(Text);
  if (Hex && T.size() > 2 && T[0] == '0' && (T[1] == 'x' || T[1] == 'X')) {
    if (T.size() > 18)
      return false;
    Out = 0;
    for (size_t I = 2; I < T.size(); ++I) {
      int C = std::tolower(static_cast<unsigned char>(T[I]));
      if (!std::isxdigit(C))
        return false;
      Out = Out * 16 + (isDigit(static_cast<char>(C)) ? C - '0' : C - 'a' + 10);
    }
    return true;
  }
  size_t At = 0;
  return digits(T, At, Out) && At == T.size() && Out != ~0ULL;
}

// "0,2-3": ranks and ranges, each in order, each rank a process number.
bool isRankList(const std::string &Text) {
  size_t At = 0;
  while (true) {
    uint64_t Lo = 0, Hi = 0;
    if (!digits(Text, At, Lo) || Lo > INT32_MAX)
      return false;
    Hi = Lo;
    if (At < Text.size() && Text[At] == '-' &&
        (++At, !digits(Text, At, Hi) || Hi > INT32_MAX || Hi < Lo))
      return false;
    if (At == Text.size())
      return true;
    if (Text[At++] != ',')
      return false;
  }
}

// What a value looks like in an error line: control characters escaped,
// so that the message stays one line.
std::string shown(const std::string &Value) {
  std::string Out;
  for (char C : Value) {
    if (static_cast<unsigned char>(C) < 0x20 || C == 0x7f) {
      char Escaped[8];
      std::snprintf(Escaped, sizeof Escaped, "\\x%02x", static_cast<unsigned char>(C));
      Out += Escaped;
    } else {
      Out += C;
    }
  }
  return Out;
}

// The longest --kernels pattern taken: the recorder compiles it with
// std::regex, whose compiler recurses per character.
constexpr size_t MaxPattern = 4096;
// The largest snapshot chunk.
constexpr uint64_t MaxChunk = 1ULL << 30;

bool set(RecordOptions &O, const std::string &Name, const std::string &Value,
         std::string &Error) {
  uint64_t N = 0;
  auto Bad = [&](const std::string &Why) {
    Error = Name + " '" + shown(Value) + "' " + Why;
    return false;
  };
  if (Name == "--rdb") {
    O.Database = Value;
  } else if (Name == "--kernels") {
    if (Value.size() > MaxPattern)
      return Bad("is longer than " + std::to_string(MaxPattern) + " characters");
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
    if (!parseWhole(Value, N, /*Hex=*/true))
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
    if (N < 4096 || N % 8 || N > MaxChunk)
      return Bad("is not a chunk size: a multiple of 8, from 4096 to 1G");
    O.ChunkSize = N;
  } else if (Name == "--zstd-level") {
    // Negative levels are zstd's fast ones.
    std::string T = trimmed(Value);
    bool Negative = !T.empty() && T[0] == '-';
    if ((Negative && (T.size() < 2 || !isDigit(T[1]))) ||
        !parseWhole(Negative ? T.substr(1) : T, N) || N > (Negative ? 100 : 19) ||
        (Negative && N == 0))
      return Bad("is not a zstd level (-100, fastest, to 19; 0 stores chunks raw)");
    O.ZstdLevel = Negative ? -static_cast<int>(N) : static_cast<int>(N);
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
      Error = "no option " + shown(A) + " (mneme record --help lists them; the application "
              "goes after --)";
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
  if (!O.Command.empty() && O.Command[0].empty())
    O.Command.clear();
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
      "MNEME_ZSTD_LEVEL", "MNEME_VERBOSE", "MNEME_LAUNCHED_NS"};
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
