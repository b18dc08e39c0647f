// Reads device memory for a snapshot: hashes every chunk of every region on
// the GPU (two kernel launches in all, at memory bandwidth) and copies to the
// host only the chunks the caller asks for, through a pinned staging buffer.
//
// Runs on a private stream after the device is idle; never touches the
// application's streams or the VA window.
#ifndef MNEME_RECORDER_DEVICE_SNAPSHOT_H
#define MNEME_RECORDER_DEVICE_SNAPSHOT_H

#include "mneme/ContentHash.h"

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mneme::recorder {

using content_hash::Digest;

struct DeviceRange {
  uint64_t Address = 0, Size = 0;
};

// Where hash() spends the application's time: issuing the kernels (with
// their table and buffers), the kernels themselves on the GPU, and bringing
// the digests back.
struct HashTiming {
  uint64_t Calls = 0, Launches = 0;
  double IssueSeconds = 0, DigestSeconds = 0, KernelSeconds = 0;
  HashTiming &operator+=(const HashTiming &O) {
    Calls += O.Calls, Launches += O.Launches;
    IssueSeconds += O.IssueSeconds, DigestSeconds += O.DigestSeconds;
    KernelSeconds += O.KernelSeconds;
    return *this;
  }
};

class DeviceSnapshot {
public:
  // PieceBytes: the size of each pinned staging half; smaller pieces keep
  // a background copy from holding the copy engine against the
  // application's own transfers.  Without Kernels only copies are made
  // (hash() and hold() are not available).
  bool init(std::string &Error, uint64_t PieceBytes = 32ULL << 20, bool Kernels = true);
  // Digests of every ChunkSize piece of each range, in order.
  bool hash(const std::vector<DeviceRange> &Ranges, uint64_t ChunkSize,
            std::vector<std::vector<Digest>> &Out, std::string &Error);
  // Copies Size bytes at Address into Dst.
  bool copyToHost(uint64_t Address, uint64_t Size, char *Dst, std::string &Error);
  // Copies Size bytes at Address into device memory at Copy on the
  // snapshot's stream, so the application's work is not synchronised;
  // wait() completes the copies.
  bool copyOnDevice(uint64_t Address, uint64_t Size, CUdeviceptr Copy);
  bool wait(std::string &Error);
  // Occupies stream On for about Nanoseconds (see mneme_hold).
  bool hold(CUstream On, uint64_t Nanoseconds);

  // Allocates the pinned staging halves (else the first copy to the host
  // does).
  bool pinStaging(std::string &Error);
  const HashTiming &hashTiming() const { return Timing; }

private:
  CUstream Stream = nullptr;
  CUfunction HashPieces = nullptr, HashFinish = nullptr, HoldKernel = nullptr;
  // Per chunk: its digest and its two sums; per range, HashKernel.cu's
  // HashRange. Grown as snapshots need.
  CUdeviceptr Digests = 0, Sums = 0, RangeTable = 0;
  uint64_t DigestCapacity = 0, RangeCapacity = 0;
  std::vector<uint64_t> HostRanges;
  // Two pinned halves (from the first copy to the host on): the DMA into
  // one overlaps the copy out of the other.
  char *Staging[2] = {nullptr, nullptr};
  CUevent Copied[2] = {nullptr, nullptr};
  CUevent HashStart = nullptr, HashStop = nullptr;
  HashTiming Timing;
  std::unique_ptr<Digest[]> HostDigests;
  uint64_t StagingBytes = 0; // per half
};

} // namespace mneme::recorder

#endif
