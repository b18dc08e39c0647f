// Device memory for staged copies of snapshot bytes.  Blocks come from
// cuMemAlloc and are kept for reuse once their bytes reach the host: a
// stream-ordered pool's first allocation in a process costs 7-10 ms on the
// application's thread, a cuMemAlloc about 0.05 ms, and a reused block
// nothing.  The application's allocations trim the unused blocks when they
// find the device full.
#ifndef MNEME_RECORDER_STAGING_MEMORY_H
#define MNEME_RECORDER_STAGING_MEMORY_H

#include <cuda.h>

#include <cstdint>
#include <map>
#include <mutex>

namespace mneme::recorder {

class StagingMemory {
public:
  // A block of at least Bytes, keeping every block's total within Limit
  // (unused blocks are freed to make room); false if the device has none.
  bool take(uint64_t Bytes, uint64_t Limit, CUdeviceptr &Block);
  // Block is unused from now on (any thread).
  void give(CUdeviceptr Block);
  // Frees the unused blocks.
  void trim();
  // After a device reset: every block died with the context.
  void forget();

private:
  void trimLocked();
  std::mutex Lock;
  std::map<CUdeviceptr, uint64_t> Sizes;        // every block
  std::multimap<uint64_t, CUdeviceptr> Unused;  // by size
  uint64_t Total = 0;
};

} // namespace mneme::recorder

#endif
