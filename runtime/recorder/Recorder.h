// The recorder: serves device allocations from the VA window
// (RecorderMemory.cpp) and, around each selected kernel launch, snapshots
// device state into the record database (Recorder.cpp).  The interposed
// CUDA entry points (Interpose.cpp) call in here; everything not selected
// passes straight through.
#ifndef MNEME_RECORDER_RECORDER_H
#define MNEME_RECORDER_RECORDER_H

#include "CallRef.h"
#include "DatabaseWriter.h"
#include "DeviceSnapshot.h"
#include "Registry.h"
#include "VAWindow.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <unordered_set>

namespace mneme::recorder {

struct LaunchRequest {
  const char *Api = "cudaLaunchKernel";
  const void *Function = nullptr;
  dim3 Grid, Block, Cluster{0, 0, 0};
  void **Args = nullptr;
  size_t SharedMem = 0;
  cudaStream_t Stream = nullptr;
  bool Cooperative = false;
  // The application's launch, unchanged (set it from a named callable).
  CallRef<cudaError_t> Launch;
};

class Recorder {
public:
  static Recorder &get();

  cudaError_t allocate(void **Ptr, size_t Size, const char *Api,
                       CallRef<cudaError_t> Real);
  cudaError_t release(void *Ptr, CallRef<cudaError_t> Real);
  cudaError_t releaseAsync(void *Ptr, cudaStream_t Stream,
                           CallRef<cudaError_t> Real);
  void noteManaged(void *Ptr, size_t Size);
  void deviceReset();
  cudaError_t launch(const LaunchRequest &R);
  // Waits for the writer and prints what was recorded (at exit).
  void finish();

private:
  struct Param {
    uint64_t Offset, Size;
  };
  struct Global {
    std::string Name;
    uint64_t Address, Size;
    bool Constant;
  };
  struct KernelState {
    bool Selected = false;
    const void *HostFunction = nullptr;
    std::string Name, Demangled, StaticHash;
    void **Module = nullptr;
    CUfunction Function = nullptr;
    std::vector<Param> Params;
    bool ParamsKnown = false;
    const struct IRModule *IR = nullptr;
    uint64_t Launches = 0, Recorded = 0;
    std::set<std::string> Seen; // dynamic hashes
    bool DescriptionQueued = false;
  };
  struct Region {
    uint32_t Kind;
    std::string Name;
    uint64_t Address, Size;
  };
  // A device-side copy of snapshot bytes on their way to a host buffer.
  struct StagedCopy {
    CUdeviceptr Copy;
    uint64_t Bytes;
    HostBuffer Buffer;
  };

  bool start(); // lazily, under Lock; false: pass everything through
  bool openWindow();
  KernelState &kernelState(const void *Function);
  void resolveParams(KernelState &K);
  std::string packArgs(const KernelState &K, void **Args) const;
  std::vector<std::string> replayBlockers(const KernelState &K, const std::string &Args);
  cudaError_t record(KernelState &K, const LaunchRequest &R, const std::string &Args,
                     const std::string &Dynamic);
  bool storeChunks(const std::vector<Region> &Regions,
                   const std::vector<std::vector<Digest>> &Digests,
                   const std::vector<std::vector<bool>> *Changed, InstanceJob &Job,
                   std::vector<StagedCopy> &Staged, std::string &Error);
  // On the writer's fetch thread: staged copies to their host buffers.
  bool fetch(const std::vector<StagedCopy> &Staged, std::string &Error);
  void drainFrees();
  // The `<static>.json` of a kernel (docs/record-db.md).
  std::string describeKernel(const KernelState &K, const std::vector<VariableSymbol> &Vars,
                             std::string_view AppImage) const;

  std::mutex Lock;
  enum class Mode { Unstarted, PassThrough, Recording } State = Mode::Unstarted;
  bool SnapshotReady = false;
  bool WindowFailed = false, ReportedOverflow = false, ReportedManaged = false;
  VAWindow Window;
  DeviceSnapshot Snapshot;
  // Snapshot bytes are copied device-to-device (fast) while the application
  // waits, and to the host in the background, within StagingCap bytes.
  DeviceSnapshot Fetcher; // used by the writer's fetch thread only
  bool FetcherReady = false, Finished = false;
  CUcontext Context = nullptr;
  std::atomic<uint64_t> StagedBytes{0};
  uint64_t StagingCap = 0;
  std::unique_ptr<DatabaseWriter> Writer;
  std::unique_ptr<std::regex> Filter;
  std::string Arch, DeviceName;
  std::map<const void *, KernelState> Kernels;
  std::map<uint64_t, uint64_t> Outside; // allocations served outside the window
  std::map<uint64_t, uint64_t> Managed;
  struct DigestHasher {
    size_t operator()(const Digest &D) const { return D.Lo; }
  };
  std::unordered_set<Digest, DigestHasher> KnownChunks; // stored or queued
  cudaEvent_t Start = nullptr, Stop = nullptr;
  uint64_t InstancesQueued = 0;
  // Where recording time goes (reported with --verbose).
  double HashSeconds = 0, CopySeconds = 0, SubmitSeconds = 0;
  uint64_t CopiedBytes = 0, CopyRuns = 0;

  // Stream-ordered frees land here from a host callback, which must not
  // take Lock (it runs while the host thread may wait on the device).
  std::mutex FreesLock;
  std::vector<uint64_t> ReadyFrees;
  static void CUDART_CB onStreamFree(void *Data);
};

} // namespace mneme::recorder

#endif
