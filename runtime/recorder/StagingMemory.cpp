#include "StagingMemory.h"

#include "CudaApi.h"

#include <limits>

namespace mneme::recorder {

bool StagingMemory::take(uint64_t Bytes, uint64_t Limit, CUdeviceptr &Block) {
  std::lock_guard<std::mutex> G(Lock);
  // The smallest unused block that holds Bytes, unless it would waste more
  // than it holds.
  auto Fit = Unused.lower_bound(Bytes);
  if (Fit != Unused.end() && Fit->first <= 2 * Bytes) {
    Block = Fit->second;
    UnusedBytes -= Fit->first;
    Unused.erase(Fit);
    InUse.insert(Block);
    return true;
  }
  if (Bytes > Limit)
    return false;
  trimLocked(std::numeric_limits<uint64_t>::max(), Limit - Bytes); // only what makes room
  if (Total + Bytes > Limit)
    return false;
  if (driver().MemAlloc(&Block, Bytes) != CUDA_SUCCESS) {
    trimLocked(0, 0);
    if (driver().MemAlloc(&Block, Bytes) != CUDA_SUCCESS)
      return false;
  }
  Sizes[Block] = Bytes;
  InUse.insert(Block);
  Total += Bytes;
  return true;
}

bool StagingMemory::give(CUdeviceptr Block) {
  std::lock_guard<std::mutex> G(Lock);
  if (InUse.erase(Block) == 0)
    return InUse.empty();
  uint64_t Bytes = Sizes[Block];
  Unused.emplace(Bytes, Block);
  UnusedBytes += Bytes;
  return InUse.empty();
}

void StagingMemory::trim(uint64_t Keep) {
  std::lock_guard<std::mutex> G(Lock);
  trimLocked(Keep, std::numeric_limits<uint64_t>::max());
}

void StagingMemory::reset() {
  std::lock_guard<std::mutex> G(Lock);
  trimLocked(0, 0);
  Sizes.clear();
  InUse.clear();
  Total = 0;
}

// Frees unused blocks, the largest first, while more than UnusedAtMost
// bytes of them or more than TotalAtMost bytes in all are held.
void StagingMemory::trimLocked(uint64_t UnusedAtMost, uint64_t TotalAtMost) {
  while (!Unused.empty() && (UnusedBytes > UnusedAtMost || Total > TotalAtMost)) {
    auto Largest = std::prev(Unused.end());
    auto [Bytes, Block] = *Largest;
    driver().MemFree(Block);
    Sizes.erase(Block);
    Unused.erase(Largest);
    UnusedBytes -= Bytes;
    Total -= Bytes;
  }
}

} // namespace mneme::recorder
