// fetchPieces: staged copies of the sizes given, in KiB, with a limit of
// LIMIT KiB -> one line per fetch: "copy:at:bytes ..." in KiB.
// Usage: fetch_pieces LIMIT SIZE...
#include "FetchPieces.h"

#include <cstdio>
#include <cstdlib>

using namespace mneme::recorder;

int main(int Argc, char **Argv) {
  if (Argc < 2)
    return 2;
  const uint64_t Limit = std::strtoull(Argv[1], nullptr, 10);
  std::vector<uint64_t> Sizes;
  for (int I = 2; I < Argc; ++I)
    Sizes.push_back(std::strtoull(Argv[I], nullptr, 10));
  for (const auto &Piece : fetchPieces(Sizes, Limit)) {
    const char *Sep = "";
    for (const FetchSpan &F : Piece) {
      std::printf("%s%zu:%llu:%llu", Sep, F.Copy, static_cast<unsigned long long>(F.At),
                  static_cast<unsigned long long>(F.Bytes));
      Sep = " ";
    }
    std::printf("\n");
  }
  return 0;
}
