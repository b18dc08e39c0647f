// Captures one selected launch in three steps around the application's own
// launch: the prologue hashes every region on the GPU and stages the chunks
// the database lacks; the launch runs the kernel, timed on its stream, and
// waits for it; the epilogue hashes again and stages the chunks the kernel
// changed.  A step that fails frees what was staged and returns false; the
// caller gives the instance up.
#ifndef MNEME_RECORDER_LAUNCH_CAPTURE_H
#define MNEME_RECORDER_LAUNCH_CAPTURE_H

#include "ChunkCopier.h"
#include "LaunchRequest.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mneme::recorder {

struct CapturedLaunch {
  std::vector<SnapshotRegion> Regions; // set by the caller
  std::vector<std::vector<Digest>> Before, After;
  std::vector<std::vector<bool>> Changed; // per chunk: the kernel wrote it
  std::vector<StagedCopy> Staged;
  uint64_t ChangedBytes = 0;
  float Ms = 0; // the kernel's time in the application
};

// Where recording time goes (reported with --verbose).
struct CaptureStats {
  double HashSeconds, CopySeconds; // hashing: Hash's issuing and digests
  uint64_t CopiedBytes, CopyRuns;
  double FetcherSetupSeconds; // on the writer's fetch threads
  unsigned Fetchers;
  HashTiming Hash;
  double KernelSeconds; // the recorded launches themselves, on the GPU
};

class LaunchCapture {
public:
  explicit LaunchCapture(InstanceWriter &Database) : Copier(Snapshot, Database) {}
  // When recording starts, in the application's context.
  void start(CUcontext Context);
  // After a device reset: whatever lived on the device is gone.
  void reset();
  // The hash kernel and the staging memory, at the first recorded launch.
  bool ready(std::string &Error);

  bool prologue(CapturedLaunch &C, InstanceJob &Job, std::string &Error);
  // False if the launch (Result) or the kernel failed.
  bool launch(const LaunchRequest &R, CapturedLaunch &C, cudaError_t &Result);
  bool epilogue(CapturedLaunch &C, InstanceJob &Job, std::string &Error);
  // The staged copies go with Job, to be fetched on the writer's thread.
  void handOver(const CapturedLaunch &C, InstanceJob &Job);

  CaptureStats stats() const;
  // Gives the staging memory no copy holds back to the device.
  void trimStaging() { Copier.trimStaging(); }

private:
  DeviceSnapshot Snapshot;
  bool SnapshotReady = false;
  ChunkCopier Copier;
  cudaEvent_t Start = nullptr, Stop = nullptr;
  double CopySeconds = 0, KernelSeconds = 0;
  HashTiming PastHashes; // of the snapshots before a device reset
};

} // namespace mneme::recorder

#endif
