#include "VAWindow.h"

#include "CudaApi.h"

#include <cstdio>

namespace mneme::recorder {
namespace {

uint64_t alignUp(uint64_t V, uint64_t A) { return (V + A - 1) / A * A; }

std::string hex(uint64_t V) {
  char Buf[32];
  std::snprintf(Buf, sizeof Buf, "0x%llx", static_cast<unsigned long long>(V));
  return Buf;
}

CUmemAllocationProp deviceProp(int Device) {
  CUmemAllocationProp Prop = {};
  Prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  Prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  Prop.location.id = Device;
  return Prop;
}

} // namespace

bool VAWindow::open(uint64_t Base, uint64_t Size, bool RequireBase, std::string &Error) {
  const Driver &D = driver();
  CUdevice Dev;
  CUresult R = D.CtxGetDevice(&Dev);
  if (R != CUDA_SUCCESS) {
    Error = "no CUDA context to reserve the VA window in (" + driverErrorName(R) + ")";
    return false;
  }
  Device = Dev;
  CUmemAllocationProp Prop = deviceProp(Device);
  size_t G = 0;
  R = D.MemGetAllocationGranularity(&G, &Prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (R != CUDA_SUCCESS || G == 0) {
    Error = "the device does not support virtual memory management (" +
            driverErrorName(R) + ")";
    return false;
  }
  Granule = G;
  if (Size == 0) {
    size_t Total = 0;
    D.DeviceTotalMem(&Total, Dev);
    Size = 2 * static_cast<uint64_t>(Total);
  }
  Size = alignUp(Size, Granule);

  // The driver honours the hint only for large reservations, and only when
  // the range is free in this process; try a few bases before giving up on
  // a fixed one (replay then reserves whatever base is recorded).
  std::vector<uint64_t> Bases = {Base};
  if (!RequireBase)
    for (uint64_t B : {0x300000000000ULL, 0x400000000000ULL, 0x100000000000ULL, 0ULL})
      if (B != Base)
        Bases.push_back(B);
  CUdeviceptr Got = 0;
  for (uint64_t B : Bases) {
    R = D.MemAddressReserve(&Got, Size, Granule, B, 0);
    if (R != CUDA_SUCCESS)
      continue;
    if (B == 0 || Got == B)
      break;
    D.MemAddressFree(Got, Size);
    Got = 0;
  }
  if (Got == 0) {
    Error = "cannot reserve the VA window [" + hex(Base) + ", " + hex(Base + Size) +
            ") (" + driverErrorName(R) + "); choose another range with --va-base/--vass";
    return false;
  }
  Reserved = Got;
  ReservedSize = Size;
  Free[0] = Size;
  GranuleMapping.assign(Size / Granule, -1);
  return true;
}

CUresult VAWindow::mapRun(uint64_t First, uint64_t Count, uint64_t &Id) {
  const Driver &D = driver();
  CUmemAllocationProp Prop = deviceProp(Device);
  uint64_t Bytes = Count * Granule;
  CUmemGenericAllocationHandle Handle;
  CUresult R = D.MemCreate(&Handle, Bytes, &Prop, 0);
  if (R != CUDA_SUCCESS)
    return R;
  CUdeviceptr At = Reserved + First * Granule;
  R = D.MemMap(At, Bytes, 0, Handle, 0);
  if (R != CUDA_SUCCESS) {
    D.MemRelease(Handle);
    return R;
  }
  CUmemAccessDesc Access = {};
  Access.location = Prop.location;
  Access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  R = D.MemSetAccess(At, Bytes, &Access, 1);
  if (R != CUDA_SUCCESS) {
    D.MemUnmap(At, Bytes);
    D.MemRelease(Handle);
    return R;
  }
  Id = NextMapping++;
  Mappings[Id] = Mapping{First, Count, Handle, 0};
  for (uint64_t G = First; G < First + Count; ++G)
    GranuleMapping[G] = static_cast<int64_t>(Id);
  Mapped += Bytes;
  return CUDA_SUCCESS;
}

void VAWindow::unmap(uint64_t Id) {
  const Driver &D = driver();
  Mapping &M = Mappings[Id];
  uint64_t Bytes = M.Count * Granule;
  D.MemUnmap(Reserved + M.First * Granule, Bytes);
  D.MemRelease(M.Handle);
  for (uint64_t G = M.First; G < M.First + M.Count; ++G)
    GranuleMapping[G] = -1;
  Mapped -= Bytes;
  Mappings.erase(Id);
}

VAWindow::Outcome VAWindow::allocate(uint64_t Size, uint64_t Alignment, uint64_t &Ptr,
                                     CUresult &Err) {
  Err = CUDA_SUCCESS;
  // Large allocations start on a granule so that they share none.
  if (Size >= Granule && Alignment < Granule)
    Alignment = Granule;
  uint64_t Offset = 0;
  bool Found = false;
  for (auto &[Start, Length] : Free) {
    uint64_t At = alignUp(Start, Alignment);
    if (At + Size <= Start + Length) {
      Offset = At;
      Found = true;
      break;
    }
  }
  if (!Found)
    return Outcome::DoesNotFit;

  // Map the granules this allocation touches that nothing maps yet.
  Allocation A;
  A.Address = Reserved + Offset;
  A.Size = Size;
  uint64_t First = Offset / Granule, Last = (Offset + Size - 1) / Granule;
  for (uint64_t G = First; G <= Last;) {
    if (GranuleMapping[G] >= 0) {
      uint64_t Id = GranuleMapping[G];
      if (A.Mappings.empty() || A.Mappings.back() != Id)
        A.Mappings.push_back(Id);
      G = Mappings[Id].First + Mappings[Id].Count;
      continue;
    }
    uint64_t RunEnd = G;
    while (RunEnd <= Last && GranuleMapping[RunEnd] < 0)
      ++RunEnd;
    uint64_t Id;
    Err = mapRun(G, RunEnd - G, Id);
    if (Err != CUDA_SUCCESS) {
      for (uint64_t Made : A.Mappings)
        if (Mappings[Made].Users == 0)
          unmap(Made);
      return Outcome::DriverError;
    }
    A.Mappings.push_back(Id);
    G = RunEnd;
  }
  for (uint64_t Id : A.Mappings)
    ++Mappings[Id].Users;

  // Carve [Offset, Offset + Size) out of its free block.
  auto It = std::prev(Free.upper_bound(Offset));
  uint64_t Start = It->first, Length = It->second;
  Free.erase(It);
  if (Offset > Start)
    Free[Start] = Offset - Start;
  uint64_t End = alignUp(Offset + Size, 256);
  if (End < Start + Length)
    Free[End] = Start + Length - End;
  Ptr = A.Address;
  Live[A.Address] = std::move(A);
  return Outcome::Ok;
}

bool VAWindow::release(uint64_t Ptr) {
  auto It = Live.find(Ptr);
  if (It == Live.end())
    return false;
  Allocation A = std::move(It->second);
  Live.erase(It);
  for (uint64_t Id : A.Mappings)
    if (--Mappings[Id].Users == 0)
      unmap(Id);
  // Return the range and coalesce with its neighbours.
  uint64_t Offset = A.Address - Reserved;
  uint64_t Length = alignUp(A.Size, 256);
  if (Offset + Length > ReservedSize)
    Length = ReservedSize - Offset;
  auto Next = Free.lower_bound(Offset);
  if (Next != Free.end() && Next->first == Offset + Length) {
    Length += Next->second;
    Next = Free.erase(Next);
  }
  if (Next != Free.begin()) {
    auto Prev = std::prev(Next);
    if (Prev->first + Prev->second == Offset) {
      Prev->second += Length;
      return true;
    }
  }
  Free[Offset] = Length;
  return true;
}

const Allocation *VAWindow::find(uint64_t Ptr) const {
  auto It = Live.upper_bound(Ptr);
  if (It == Live.begin())
    return nullptr;
  --It;
  const Allocation &A = It->second;
  return Ptr < A.Address + std::max<uint64_t>(A.Size, 1) ? &A : nullptr;
}

uint64_t VAWindow::liveBytes() const {
  uint64_t Sum = 0;
  for (const auto &[Address, A] : Live)
    Sum += A.Size;
  return Sum;
}

} // namespace mneme::recorder
