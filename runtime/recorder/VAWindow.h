// The VA window: one large virtual-address reservation at a fixed base from
// which every device allocation of a recorded application is served, so a
// replay can restore memory at the very same addresses (pointers stored in
// device data stay valid).
//
// Physical memory is mapped lazily: an allocation maps only the granules
// (2 MiB on current GPUs) it touches that are not mapped yet, as one
// physical allocation per run of new granules; small allocations share
// granules.  A physical allocation is unmapped and released when no live
// allocation touches it.  Nothing is committed up front.
//
// Not thread-safe: the recorder serialises calls.
#ifndef MNEME_RECORDER_VA_WINDOW_H
#define MNEME_RECORDER_VA_WINDOW_H

#include <cuda.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mneme::recorder {

struct Allocation {
  uint64_t Address = 0;
  uint64_t Size = 0;                 // as requested
  std::vector<uint64_t> Mappings;    // physical runs it keeps alive
};

class VAWindow {
public:
  // Reserves Size bytes at Base (0 Size: twice the device's memory) in the
  // current context.  If the driver does not honour Base and RequireBase is
  // false, a few other bases are tried and then any address is taken.
  bool open(uint64_t Base, uint64_t Size, bool RequireBase, std::string &Error);
  bool isOpen() const { return Reserved != 0; }
  uint64_t base() const { return Reserved; }
  uint64_t size() const { return ReservedSize; }
  uint64_t granularity() const { return Granule; }
  int device() const { return Device; }
  bool contains(uint64_t Ptr) const {
    return Ptr >= Reserved && Ptr < Reserved + ReservedSize;
  }

  enum class Outcome { Ok, DoesNotFit, DriverError };
  // Serves Size bytes aligned to Alignment (a power of two).
  Outcome allocate(uint64_t Size, uint64_t Alignment, uint64_t &Ptr, CUresult &Err);
  // Frees the allocation starting at Ptr; false if there is none.
  bool release(uint64_t Ptr);

  // The allocation containing Ptr, or null.
  const Allocation *find(uint64_t Ptr) const;
  const std::map<uint64_t, Allocation> &live() const { return Live; }
  uint64_t mappedBytes() const { return Mapped; }
  uint64_t liveBytes() const;

private:
  struct Mapping {
    uint64_t First = 0, Count = 0; // granules
    CUmemGenericAllocationHandle Handle = 0;
    uint64_t Users = 0;
  };
  CUresult mapRun(uint64_t First, uint64_t Count, uint64_t &Id);
  void unmap(uint64_t Id);

  uint64_t Reserved = 0, ReservedSize = 0, Granule = 0;
  int Device = 0;
  std::map<uint64_t, uint64_t> Free;      // offset -> length, coalesced
  std::map<uint64_t, Allocation> Live;    // address -> allocation
  std::vector<int64_t> GranuleMapping;    // granule -> mapping id, or -1
  std::map<uint64_t, Mapping> Mappings;
  uint64_t NextMapping = 0, Mapped = 0;
};

} // namespace mneme::recorder

#endif
