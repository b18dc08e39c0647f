#include "StagingMemory.h"

#include "CudaApi.h"

namespace mneme::recorder {

bool StagingMemory::take(uint64_t Bytes, uint64_t Limit, CUdeviceptr &Block) {
  std::lock_guard<std::mutex> G(Lock);
  // The smallest unused block that holds Bytes, unless it would waste more
  // than it holds.
  auto Fit = Unused.lower_bound(Bytes);
  if (Fit != Unused.end() && Fit->first <= 2 * Bytes) {
    Block = Fit->second;
    Unused.erase(Fit);
    return true;
  }
  if (Total + Bytes > Limit)
    trimLocked();
  if (Total + Bytes > Limit)
    return false;
  if (driver().MemAlloc(&Block, Bytes) != CUDA_SUCCESS) {
    trimLocked();
    if (driver().MemAlloc(&Block, Bytes) != CUDA_SUCCESS)
      return false;
  }
  Sizes[Block] = Bytes;
  Total += Bytes;
  return true;
}

void StagingMemory::give(CUdeviceptr Block) {
  std::lock_guard<std::mutex> G(Lock);
  auto It = Sizes.find(Block);
  if (It != Sizes.end())
    Unused.emplace(It->second, Block);
}

void StagingMemory::trim() {
  std::lock_guard<std::mutex> G(Lock);
  trimLocked();
}

void StagingMemory::trimLocked() {
  for (const auto &[Bytes, Block] : Unused) {
    driver().MemFree(Block);
    Sizes.erase(Block);
    Total -= Bytes;
  }
  Unused.clear();
}

void StagingMemory::forget() {
  std::lock_guard<std::mutex> G(Lock);
  Sizes.clear();
  Unused.clear();
  Total = 0;
}

} // namespace mneme::recorder
