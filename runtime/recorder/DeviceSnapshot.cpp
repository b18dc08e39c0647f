#include "DeviceSnapshot.h"

#include "Clock.h"
#include "CudaApi.h"

#include <algorithm>
#include <cstring>

// HashKernel.cu as a fatbinary (SASS for current archs, PTX for newer ones),
// generated at build time.
extern const unsigned char MnemeHashKernelImage[];

namespace mneme::recorder {
namespace {

bool check(CUresult R, const char *What, std::string &Error) {
  if (R == CUDA_SUCCESS)
    return true;
  Error = std::string(What) + " failed (" + driverErrorName(R) + ")";
  return false;
}

} // namespace

bool DeviceSnapshot::init(std::string &Error, uint64_t PieceBytes, bool Kernels) {
  const Driver &D = driver();
  StagingBytes = PieceBytes;
  CUmodule Module;
  return check(D.StreamCreate(&Stream, CU_STREAM_NON_BLOCKING), "creating a stream", Error) &&
         (!Kernels ||
          (check(D.ModuleLoadData(&Module, MnemeHashKernelImage), "loading the hash kernel",
                 Error) &&
           check(D.ModuleGetFunction(&HashPieces, Module, "mneme_hash_pieces"),
                 "finding the hash kernel", Error) &&
           check(D.ModuleGetFunction(&HashFinish, Module, "mneme_hash_finish"),
                 "finding the hash kernel", Error) &&
           check(D.ModuleGetFunction(&HoldKernel, Module, "mneme_hold"),
                 "finding the hold kernel", Error) &&
           check(D.EventCreate(&HashStart, CU_EVENT_DEFAULT), "creating an event", Error) &&
           check(D.EventCreate(&HashStop, CU_EVENT_DEFAULT), "creating an event", Error))) &&
         check(D.EventCreate(&Copied[0], CU_EVENT_DISABLE_TIMING), "creating an event", Error) &&
         check(D.EventCreate(&Copied[1], CU_EVENT_DISABLE_TIMING), "creating an event", Error);
}

bool DeviceSnapshot::hold(CUstream On, uint64_t Nanoseconds) {
  unsigned long long Ns = Nanoseconds;
  void *Args[] = {&Ns};
  return driver().LaunchKernel(HoldKernel, 1, 1, 1, 1, 1, 1, 0, On, Args, nullptr) ==
         CUDA_SUCCESS;
}

namespace {
// Bytes one block of mneme_hash_pieces reads: short enough a chain of loads
// that even one chunk spreads over the GPU, a multiple of 16 bytes.
constexpr uint64_t HashPieceBytes = 128 << 10;
} // namespace

bool DeviceSnapshot::hash(const std::vector<DeviceRange> &Ranges, uint64_t ChunkSize,
                          std::vector<std::vector<Digest>> &Out, std::string &Error) {
  const Driver &D = driver();
  const double T0 = now(); // issuing: the table and buffers too
  // The nonempty ranges as HashKernel.cu's HashRange {Address, Size, First}.
  HostRanges.clear();
  uint64_t Total = 0, Largest = 0;
  for (const DeviceRange &R : Ranges) {
    if (R.Size == 0)
      continue;
    HostRanges.insert(HostRanges.end(), {R.Address, R.Size, Total});
    Total += (R.Size + ChunkSize - 1) / ChunkSize;
    Largest = std::max(Largest, R.Size);
  }
  const uint64_t Count = HostRanges.size() / 3;
  if (Total > DigestCapacity) {
    for (CUdeviceptr *P : {&Digests, &Sums})
      if (*P) {
        D.MemFree(*P);
        *P = 0;
      }
    DigestCapacity = 0;
    uint64_t Capacity = std::max<uint64_t>(Total, 4096);
    if (!check(D.MemAlloc(&Digests, Capacity * sizeof(Digest)), "allocating digests", Error) ||
        !check(D.MemAlloc(&Sums, Capacity * 2 * sizeof(uint64_t)), "allocating hash sums",
               Error))
      return false;
    HostDigests = std::make_unique<Digest[]>(Capacity);
    DigestCapacity = Capacity;
  }
  if (Count > RangeCapacity) {
    if (RangeTable)
      D.MemFree(RangeTable);
    RangeTable = 0;
    RangeCapacity = 0;
    uint64_t Capacity = std::max<uint64_t>(Count, 256);
    if (!check(D.MemAlloc(&RangeTable, Capacity * 3 * sizeof(uint64_t)),
               "allocating the regions to hash", Error))
      return false;
    RangeCapacity = Capacity;
  }
  D.EventRecord(HashStart, Stream);
  if (Total) {
    // A single piece where chunks are small (their size is a multiple of 8,
    // not necessarily of 16).
    unsigned long long Chunk = ChunkSize, Piece = std::min(ChunkSize, HashPieceBytes),
                       Chunks = Total;
    unsigned Ranged = static_cast<unsigned>(Count);
    CUdeviceptr Table = RangeTable, Into = Sums, Digested = Digests;
    void *PieceArgs[] = {&Table, &Ranged, &Chunk, &Piece, &Into};
    void *FinishArgs[] = {&Table, &Ranged, &Chunk, &Chunks, &Into, &Digested};
    // As many pieces as the largest chunk any range has.
    const unsigned Pieces =
        static_cast<unsigned>((std::min(ChunkSize, Largest) + Piece - 1) / Piece);
    // Pageable source: the table is staged before the call returns.
    if (!check(D.MemcpyHtoDAsync(RangeTable, HostRanges.data(),
                                 HostRanges.size() * sizeof(uint64_t), Stream),
               "copying the regions to hash", Error) ||
        !check(D.MemsetD32Async(Sums, 0, Total * 4, Stream), "clearing digests", Error) ||
        !check(D.LaunchKernel(HashPieces, static_cast<unsigned>(Total), Pieces, 1, 256, 1, 1, 0,
                              Stream, PieceArgs, nullptr),
               "launching the hash kernel", Error) ||
        !check(D.LaunchKernel(HashFinish, static_cast<unsigned>((Total + 255) / 256), 1, 1, 256,
                              1, 1, 0, Stream, FinishArgs, nullptr),
               "launching the hash kernel", Error))
      return false;
    Timing.Launches += 2;
  }
  D.EventRecord(HashStop, Stream);
  const double T1 = now();
  // Pageable destination: the copy completes before the call returns.
  if (Total &&
      !check(D.MemcpyDtoHAsync(HostDigests.get(), Digests, Total * sizeof(Digest), Stream),
             "copying digests", Error))
    return false;
  if (!check(D.StreamSynchronize(Stream), "hashing device memory", Error))
    return false;
  float KernelMs = 0;
  D.EventElapsedTime(&KernelMs, HashStart, HashStop);
  ++Timing.Calls;
  Timing.IssueSeconds += T1 - T0;
  Timing.DigestSeconds += now() - T1;
  Timing.KernelSeconds += KernelMs / 1e3;
  Out.clear();
  uint64_t At = 0;
  for (const DeviceRange &R : Ranges) {
    uint64_t Chunks = (R.Size + ChunkSize - 1) / ChunkSize;
    Out.emplace_back(HostDigests.get() + At, HostDigests.get() + At + Chunks);
    At += Chunks;
  }
  return true;
}

bool DeviceSnapshot::copyOnDevice(uint64_t Address, uint64_t Size, CUdeviceptr Copy) {
  return driver().MemcpyDtoDAsync(Copy, Address, Size, Stream) == CUDA_SUCCESS;
}

bool DeviceSnapshot::wait(std::string &Error) {
  return check(driver().StreamSynchronize(Stream), "staging device memory", Error);
}

// Pinned memory costs about 0.5 ms per MiB to allocate and free, so the
// halves come with the first copy through them: a recording whose copies
// all go through device staging never pays for them.
bool DeviceSnapshot::pinStaging(std::string &Error) {
  const Driver &D = driver();
  for (char *&Half : Staging)
    if (!Half && !check(D.MemAllocHost(reinterpret_cast<void **>(&Half), StagingBytes),
                        "allocating pinned staging memory", Error))
      return false;
  return true;
}

bool DeviceSnapshot::copyToHost(uint64_t Address, uint64_t Size, char *Dst,
                                std::string &Error) {
  const Driver &D = driver();
  if (!pinStaging(Error))
    return false;
  const uint64_t Pieces = (Size + StagingBytes - 1) / StagingBytes;
  auto Length = [&](uint64_t K) { return std::min(StagingBytes, Size - K * StagingBytes); };
  for (uint64_t K = 0; K <= Pieces; ++K) {
    if (K < Pieces &&
        (!check(D.MemcpyDtoHAsync(Staging[K % 2], Address + K * StagingBytes, Length(K), Stream),
                "copying to the host", Error) ||
         !check(D.EventRecord(Copied[K % 2], Stream), "copying to the host", Error)))
      return false;
    if (K > 0) {
      uint64_t Prev = K - 1;
      if (!check(D.EventSynchronize(Copied[Prev % 2]), "copying to the host", Error))
        return false;
      std::memcpy(Dst + Prev * StagingBytes, Staging[Prev % 2], Length(Prev));
    }
  }
  return true;
}

} // namespace mneme::recorder
