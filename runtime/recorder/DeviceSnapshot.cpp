#include "DeviceSnapshot.h"

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
           check(D.ModuleGetFunction(&Kernel, Module, "mneme_hash_chunks"),
                 "finding the hash kernel", Error) &&
           check(D.ModuleGetFunction(&HoldKernel, Module, "mneme_hold"),
                 "finding the hold kernel", Error))) &&
         check(D.EventCreate(&Copied[0], CU_EVENT_DISABLE_TIMING), "creating an event", Error) &&
         check(D.EventCreate(&Copied[1], CU_EVENT_DISABLE_TIMING), "creating an event", Error);
}

bool DeviceSnapshot::hold(CUstream On, uint64_t Nanoseconds) {
  unsigned long long Ns = Nanoseconds;
  void *Args[] = {&Ns};
  return driver().LaunchKernel(HoldKernel, 1, 1, 1, 1, 1, 1, 0, On, Args, nullptr) ==
         CUDA_SUCCESS;
}

bool DeviceSnapshot::hash(const std::vector<DeviceRange> &Ranges, uint64_t ChunkSize,
                          std::vector<std::vector<Digest>> &Out, std::string &Error) {
  const Driver &D = driver();
  uint64_t Total = 0;
  for (const DeviceRange &R : Ranges)
    Total += (R.Size + ChunkSize - 1) / ChunkSize;
  if (Total > DigestCapacity) {
    if (Digests)
      D.MemFree(Digests);
    uint64_t Capacity = std::max<uint64_t>(Total, 4096);
    if (!check(D.MemAlloc(&Digests, Capacity * sizeof(Digest)), "allocating digests", Error))
      return false;
    if (HostDigests)
      delete[] HostDigests;
    HostDigests = new Digest[Capacity];
    DigestCapacity = Capacity;
  }
  uint64_t At = 0;
  for (const DeviceRange &R : Ranges) {
    uint64_t Chunks = (R.Size + ChunkSize - 1) / ChunkSize;
    if (Chunks == 0)
      continue;
    CUdeviceptr Base = R.Address, Dst = Digests + At * sizeof(Digest);
    unsigned long long Size = R.Size, Chunk = ChunkSize;
    void *Params[] = {&Base, &Size, &Chunk, &Dst};
    if (!check(D.LaunchKernel(Kernel, static_cast<unsigned>(Chunks), 1, 1, 512, 1, 1, 0,
                              Stream, Params, nullptr),
               "launching the hash kernel", Error))
      return false;
    At += Chunks;
  }
  // Pageable destination: the copy completes before the call returns.
  if (Total &&
      !check(D.MemcpyDtoHAsync(HostDigests, Digests, Total * sizeof(Digest), Stream),
             "copying digests", Error))
    return false;
  if (!check(D.StreamSynchronize(Stream), "hashing device memory", Error))
    return false;
  Out.clear();
  At = 0;
  for (const DeviceRange &R : Ranges) {
    uint64_t Chunks = (R.Size + ChunkSize - 1) / ChunkSize;
    Out.emplace_back(HostDigests + At, HostDigests + At + Chunks);
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
