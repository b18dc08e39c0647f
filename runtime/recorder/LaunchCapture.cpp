#include "LaunchCapture.h"

#include "Clock.h"
#include "CudaApi.h"
#include "Options.h"

#include <algorithm>

namespace mneme::recorder {
namespace {

std::vector<DeviceRange> rangesOf(const std::vector<SnapshotRegion> &Regions) {
  std::vector<DeviceRange> Ranges;
  for (const SnapshotRegion &Rg : Regions)
    Ranges.push_back(DeviceRange{Rg.Address, Rg.Size});
  return Ranges;
}

// Marks the chunks whose digest the kernel changed, and counts their bytes.
void diff(CapturedLaunch &C, uint64_t ChunkSize) {
  for (size_t I = 0; I < C.Regions.size(); ++I) {
    C.Changed.emplace_back(C.After[I].size());
    for (size_t K = 0; K < C.After[I].size(); ++K)
      if (C.After[I][K] != C.Before[I][K]) {
        C.Changed[I][K] = true;
        C.ChangedBytes += std::min<uint64_t>(ChunkSize, C.Regions[I].Size - K * ChunkSize);
      }
  }
}

} // namespace

void LaunchCapture::start(CUcontext Context) {
  Copier.setContext(Context);
  driver().EventCreate(&Start, CU_EVENT_DEFAULT);
  driver().EventCreate(&Stop, CU_EVENT_DEFAULT);
}

void LaunchCapture::reset() {
  Start = Stop = nullptr;
  PastHashes += Snapshot.hashTiming(); // the counts span every context
  Snapshot = DeviceSnapshot();
  SnapshotReady = false;
  Copier.reset();
}

bool LaunchCapture::ready(std::string &Error) {
  if (SnapshotReady)
    return true;
  if (!Snapshot.init(Error))
    return false;
  SnapshotReady = true;
  size_t Free = 0, Total = 0;
  driver().MemGetInfo(&Free, &Total);
  Copier.setStagingCap(std::min<uint64_t>(4ULL << 30, Free / 4));
  return true;
}

bool LaunchCapture::prologue(CapturedLaunch &C, InstanceJob &Job, std::string &Error) {
  std::vector<DeviceRange> Ranges = rangesOf(C.Regions);
  bool Hashed = Snapshot.hash(Ranges, options().ChunkSize, C.Before, Error);
  double T1 = now();
  // Staged copies complete before the kernel may change what they copy.
  bool Copied = Hashed && Copier.copy(C.Regions, C.Before, nullptr, Job, C.Staged, Error) &&
                Snapshot.wait(Error);
  CopySeconds += now() - T1;
  if (!Copied)
    Copier.unstage(C.Staged);
  return Copied;
}

bool LaunchCapture::launch(const LaunchRequest &R, CapturedLaunch &C, cudaError_t &Result) {
  // Timed on the application's stream. A 100 us spin on the stream first
  // keeps the start event from being reached before the launch is issued,
  // so the interval is the kernel's execution and not the host's launch
  // latency. (A host-opened gate would be exact, but a stream held by the
  // host can deadlock against the runtime's implicit synchronisations in
  // other threads.)
  Snapshot.hold(reinterpret_cast<CUstream>(R.Stream), 100000);
  CUstream Stream = reinterpret_cast<CUstream>(R.Stream);
  driver().EventRecord(Start, Stream);
  Result = R.Launch();
  driver().EventRecord(Stop, Stream);
  CUresult Done = driver().CtxSynchronize();
  if (Result != cudaSuccess || Done != CUDA_SUCCESS) {
    Copier.unstage(C.Staged);
    return false;
  }
  driver().EventElapsedTime(&C.Ms, Start, Stop);
  KernelSeconds += C.Ms / 1e3;
  return true;
}

// Keeps only the chunks the kernel changed.
bool LaunchCapture::epilogue(CapturedLaunch &C, InstanceJob &Job, std::string &Error) {
  const uint64_t ChunkSize = options().ChunkSize;
  std::vector<DeviceRange> Ranges = rangesOf(C.Regions);
  if (!Snapshot.hash(Ranges, ChunkSize, C.After, Error)) {
    Copier.unstage(C.Staged);
    return false;
  }
  diff(C, ChunkSize);
  double T0 = now();
  if (!Copier.copy(C.Regions, C.After, &C.Changed, Job, C.Staged, Error) ||
      !Snapshot.wait(Error)) {
    Copier.unstage(C.Staged);
    return false;
  }
  CopySeconds += now() - T0;
  return true;
}

void LaunchCapture::handOver(const CapturedLaunch &C, InstanceJob &Job) {
  Copier.fetches(C.Staged, Job.Fetches);
}

CaptureStats LaunchCapture::stats() const {
  HashTiming Hash = HashTiming(PastHashes) += Snapshot.hashTiming();
  return CaptureStats{Hash.IssueSeconds + Hash.DigestSeconds,
                      CopySeconds,
                      Copier.copiedBytes(),
                      Copier.copyRuns(),
                      Copier.fetcherSetupSeconds(),
                      Copier.fetchers(),
                      Hash,
                      KernelSeconds};
}

} // namespace mneme::recorder
