// Device memory for staged copies of snapshot bytes.  Blocks come from
// cuMemAlloc and are kept for reuse once their bytes reach the host: a
// stream-ordered pool's first allocation in a process costs 7-10 ms on the
// application's thread, a cuMemAlloc about 0.05 ms, and a reused block
// nothing.  Unused blocks beyond a reserve are freed once no copy is staged,
// and all of them when an application allocation finds the device full.
#ifndef MNEME_RECORDER_STAGING_MEMORY_H
#define MNEME_RECORDER_STAGING_MEMORY_H

#include <cuda.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <set>

namespace mneme::recorder {

class StagingMemory {
public:
  // A block of at least Bytes, keeping every block's total within Limit
  // (unused blocks are freed to make room); false if there is no room
  // within it or on the device.
  bool take(uint64_t Bytes, uint64_t Limit, CUdeviceptr &Block);
  // Block is unused from now on (any thread); a block not in use is ignored.
  // True when no block is in use any more.
  bool give(CUdeviceptr Block);
  // Frees unused blocks, the largest first, until at most Keep bytes of
  // them are left (in the current context; cuMemFree may wait for the device).
  void trim(uint64_t Keep = 0);
  // Before a device reset, with every copy fetched: frees the unused blocks
  // and forgets the rest (the reset takes them).
  void reset();

private:
  void trimLocked(uint64_t UnusedAtMost, uint64_t TotalAtMost);
  std::mutex Lock;
  std::map<CUdeviceptr, uint64_t> Sizes;        // every block
  std::set<CUdeviceptr> InUse;
  std::multimap<uint64_t, CUdeviceptr> Unused;  // by size
  uint64_t Total = 0, UnusedBytes = 0;
};

} // namespace mneme::recorder

#endif
