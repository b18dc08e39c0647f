// The recorder: serves device allocations from the VA window
// (RecorderMemory.cpp) and records selected kernel launches
// (Recorder.cpp): each one is captured by LaunchCapture and written by the
// InstanceWriter.  The interposed CUDA entry points (Interpose.cpp) call in
// here; everything not selected passes straight through.
#ifndef MNEME_RECORDER_RECORDER_H
#define MNEME_RECORDER_RECORDER_H

#include "CallRef.h"
#include "Clock.h"
#include "InstanceWriter.h"
#include "KernelState.h"
#include "LaunchCapture.h"
#include "LaunchRequest.h"
#include "Registry.h"
#include "VAWindow.h"

#include <cuda_runtime_api.h>

#include <functional>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

namespace mneme::recorder {

class Recorder {
public:
  static Recorder &get();
  // Whether this thread is inside the recorder: a driver entry point the
  // CUDA runtime reaches on its behalf passes straight through.
  static bool busy();
  // Marks this thread inside the recorder for a scope.
  class Inside {
  public:
    Inside();
    ~Inside();

  private:
    bool Was;
  };

  cudaError_t allocate(void **Ptr, size_t Size, const char *Api,
                       CallRef<cudaError_t> Real);
  cudaError_t release(void *Ptr, CallRef<cudaError_t> Real);
  cudaError_t releaseAsync(void *Ptr, cudaStream_t Stream,
                           CallRef<cudaError_t> Real);
  void noteManaged(void *Ptr, size_t Size);
  void deviceReset();
  cudaError_t launch(const LaunchRequest &R);
  // A module or library is being unloaded: its kernels' states go, their
  // counts kept for a later load of the same code.
  void forget(const void *DriverHandle);
  // Waits for the writer and prints what was recorded (at exit).
  void finish();

private:
  bool start(); // lazily, under Lock; false: pass everything through
  bool begin(); // start()'s work, timed by it
  bool openWindow();
  KernelState &kernelState(const LaunchRequest &R);
  void resolveParams(KernelState &K);
  std::string packArgs(const KernelState &K, void **Args) const;
  std::vector<std::string> replayBlockers(const KernelState &K, const std::string &Args);
  // Every live allocation and the module's device globals.
  std::vector<SnapshotRegion> deviceRegions(KernelState &K,
                                            const std::vector<VariableSymbol> &Vars);
  // One selected, claimed launch: captured, then queued for the writer.
  cudaError_t record(KernelState &K, const LaunchRequest &R, const std::string &Args,
                     const std::string &Dynamic);
  void drainFrees();
  // Erases the kernel states Retired picks, their counts kept by static hash.
  void retire(const std::function<bool(const KernelState &)> &Retired);

  std::mutex Lock;
  enum class Mode { Unstarted, PassThrough, Recording } State = Mode::Unstarted;
  bool WindowFailed = false, ReportedOverflow = false, ReportedManaged = false;
  bool Finished = false;
  VAWindow Window;
  InstanceWriter Instances;
  LaunchCapture Capture{Instances};
  std::unique_ptr<std::regex> Filter;
  std::string Arch, DeviceName;
  std::map<const void *, KernelState> Kernels;
  // Counts of kernels whose module was unloaded, by static hash.
  struct Counts {
    uint64_t Launches = 0, Recorded = 0;
    std::set<std::string> Seen;
    bool DescriptionQueued = false;
  };
  std::map<std::string, Counts> Unloaded;
  std::map<uint64_t, uint64_t> Outside; // allocations served outside the window
  std::map<uint64_t, uint64_t> Managed;
  uint64_t InstancesQueued = 0;
  // Where the time went, reported with --verbose: queueing instances, the
  // start (the VA window's reservation among it), deciding not to record.
  double SubmitSeconds = 0, StartSeconds = 0, WindowSeconds = 0, PassOnSeconds = 0;
  // Of StartSeconds (every start, as it), for --verbose: the runtime's context and
  // the database.
  double ContextSeconds = 0, DatabaseSeconds = 0;
  uint64_t PassedOn = 0;
  // The application's threads' time in recording instances (the first's
  // apart: it sets the capture up), and the moments the timeline reports.
  double RecordSeconds = 0, FirstRecordSeconds = 0, StartedAt = 0, FinishedAt = 0;
  uint64_t RecordCalls = 0;
  // Where an instance's time on the application's thread goes: setting the
  // capture up (the first time), waiting for the device, listing regions
  // (the module's globals looked up), checking what a replay could not
  // reserve, the snapshot before, the timed launch, the snapshot after, describing
  // the instance, queueing it.
  enum Phase {
    Setup, Synchronise, Regions, Check, Before, Launch, After, Describe, Queue, PhaseCount
  };
  static constexpr const char *PhaseNames[PhaseCount] = {
      "setup", "synchronising", "regions", "checking", "before", "launch",
      "after",  "describing",    "queueing"};
  double PhaseSeconds[PhaseCount] = {};
  // Adds the time since the last mark to a phase.
  struct PhaseClock {
    double *Seconds;
    double Last;
    explicit PhaseClock(double *Into) : Seconds(Into), Last(now()) {}
    void mark(Phase P) {
      double T = now();
      Seconds[P] += T - Last;
      Last = T;
    }
  };
  void reportTimeline(double FinishBegan) const;
  unsigned WriterThreads = 1; // compressing as the application's threads do
  unsigned WriterProcessors = 1; // all its compressing threads, as begin() counted them

  // Stream-ordered frees land here from a host callback, which must not
  // take Lock (it runs while the host thread may wait on the device).
  std::mutex FreesLock;
  std::vector<uint64_t> ReadyFrees;
  static void CUDART_CB onStreamFree(void *Data);
};

} // namespace mneme::recorder

#endif
