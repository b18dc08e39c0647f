#include "FetchPieces.h"

#include <algorithm>

namespace mneme::recorder {

std::vector<std::vector<FetchSpan>> fetchPieces(const std::vector<uint64_t> &CopyBytes,
                                                uint64_t Limit) {
  std::vector<std::vector<FetchSpan>> Pieces;
  if (Limit == 0)
    return Pieces;
  uint64_t Open = Limit; // bytes in the last piece (full: start another)
  for (size_t C = 0; C < CopyBytes.size(); ++C)
    for (uint64_t At = 0; At < CopyBytes[C]; At += Limit) {
      uint64_t Bytes = std::min(Limit, CopyBytes[C] - At);
      if (Open + Bytes > Limit) {
        Pieces.emplace_back();
        Open = 0;
      }
      Pieces.back().push_back(FetchSpan{C, At, Bytes});
      Open += Bytes;
    }
  return Pieces;
}

} // namespace mneme::recorder
