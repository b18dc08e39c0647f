#include "Recorder.h"

#include "Clock.h"
#include "CudaApi.h"
#include "Options.h"
#include "Registry.h"

#include <cxxabi.h>
#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace mneme::recorder {
namespace {

using store::RegionKind;

std::string hex64(uint64_t V) {
  char Buf[24];
  std::snprintf(Buf, sizeof Buf, "%016llx", static_cast<unsigned long long>(V));
  return Buf;
}

std::string demangle(const std::string &Name) {
  int Status = 0;
  char *D = abi::__cxa_demangle(Name.c_str(), nullptr, nullptr, &Status);
  std::string Out = Status == 0 && D ? D : Name;
  std::free(D);
  return Out;
}

// Identity of content: a hash over a few values and a byte string.
struct IdentityHash {
  std::string Bytes;
  void add(uint64_t V) { Bytes.append(reinterpret_cast<const char *>(&V), 8); }
  void add(std::string_view S) {
    add(static_cast<uint64_t>(S.size()));
    Bytes += S;
  }
  std::string hex() const { return hex64(content_hash::hash(Bytes.data(), Bytes.size()).Hi); }
};

} // namespace

namespace {
thread_local bool InRecorder = false;

// When the recorder was loaded: where --verbose's timeline starts without
// the launcher's clock.
double LoadedAt = 0;
__attribute__((constructor)) void noteLoaded() { LoadedAt = now(); }

// The processors the writer may use: those this process may run on (a batch
// job's share, not the node's), at most 32 (many ranks of a node record at
// once).
unsigned writerProcessors() {
  cpu_set_t Set;
  unsigned Usable = sched_getaffinity(0, sizeof Set, &Set) == 0 && CPU_COUNT(&Set) > 0
                        ? static_cast<unsigned>(CPU_COUNT(&Set))
                        : std::max(1u, std::thread::hardware_concurrency());
  return std::min(Usable, 32u);
}
} // namespace

bool Recorder::busy() { return InRecorder; }
Recorder::Inside::Inside() : Was(InRecorder) { InRecorder = true; }
Recorder::Inside::~Inside() { InRecorder = Was; }

Recorder &Recorder::get() {
  static Recorder *R = new Recorder; // outlives every static destructor
  return *R;
}

bool Recorder::start() {
  if (State != Mode::Unstarted)
    return State == Mode::Recording;
  double T0 = now();
  StartedAt = T0;
  bool Started = begin();
  StartSeconds += now() - T0;
  return Started;
}

bool Recorder::begin() {
  State = Mode::PassThrough;
  const Options &O = options();
  if (O.Database.empty() || !O.recordsThisRank())
    return false;
  for (const std::string &E : O.Errors) {
    report(E + "; recording is off");
    return false;
  }
  if (!driver().Loaded) {
    report(driver().Error + "; recording is off");
    return false;
  }
  if (!O.KernelRegex.empty()) {
    try {
      Filter = std::make_unique<std::regex>(O.KernelRegex, std::regex::ECMAScript);
    } catch (const std::regex_error &E) {
      report("--kernels '" + O.KernelRegex + "' is not a valid regex; recording is off");
      return false;
    }
  }
  // The runtime creates the primary context on its first real call; a
  // driver-API program has made its context current before any call the
  // recorder sees.
  double Began = now();
  if (hasRuntime())
    MNEME_REAL(cudaFree)(nullptr);
  ContextSeconds += now() - Began;
  CUcontext Context = nullptr;
  driver().CtxGetCurrent(&Context);
  if (!Context) {
    report("no CUDA context is current; recording is off");
    return false;
  }
  // Registered after the runtime's own exit handler, so it runs first:
  // instances still on their way to the host need the context.
  std::atexit([] { Recorder::get().finish(); });
  std::string Error;
  Began = now();
  bool Opened = Instances.open(O.Database, Error);
  DatabaseSeconds += now() - Began;
  if (!Opened) {
    report(Error + "; recording is off, the application runs unrecorded");
    return false;
  }
  openWindow();

  CUdevice Device = 0;
  driver().CtxGetDevice(&Device);
  int Major = 0, Minor = 0;
  driver().DeviceGetAttribute(&Major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, Device);
  driver().DeviceGetAttribute(&Minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, Device);
  Arch = "sm_" + std::to_string(Major * 10 + Minor);
  char Name[256] = {0};
  if (driver().DeviceGetName(Name, sizeof Name, Device) == CUDA_SUCCESS)
    DeviceName = Name;
  Capture.start(Context);
  // Half the processors (at most 8) compress as the application's threads
  // do; the rest, to 32 in all, only where a processor would idle. The
  // writer starts them as instances need them.
  WriterProcessors = writerProcessors();
  WriterThreads = std::min(8u, std::max(1u, WriterProcessors / 2));
  Instances.start(O.ZstdLevel, WriterThreads, WriterProcessors - WriterThreads);
  State = Mode::Recording;
  return true;
}

bool Recorder::openWindow() {
  const Options &O = options();
  std::string Error;
  double T0 = now();
  bool Opened = Window.open(O.VABase, O.VASize, O.VABaseGiven, Error);
  WindowSeconds += now() - T0;
  if (Opened) {
    WindowFailed = false;
    if (Window.base() != O.VABase)
      report("the VA window is at " + hex64(Window.base()) + " (the base asked for was taken)");
    return true;
  }
  WindowFailed = true;
  report(Error + "; allocations are served by CUDA and instances are not replayable");
  return false;
}

KernelState &Recorder::kernelState(const LaunchRequest &R) {
  auto [It, New] = Kernels.try_emplace(R.Function);
  KernelState &K = It->second;
  if (!New)
    return K;
  LaunchedKernel L = registry().launched(R.Function, R.DriverApi);
  K.DriverHandle = L.DriverHandle; // forgotten with it, known or not
  if (L.Name.empty() || (R.DriverApi && L.Image.empty())) {
    // Launched through a handle the runtime did not register, or from a
    // module loaded before the recorder could see it.
    K.Selected = false;
    return K;
  }
  K.Name = L.Name;
  K.Module = L.Module;
  K.Image = L.Image;
  K.Function = L.Function;
  K.Demangled = demangle(K.Name);
  K.HostFunction = R.Function;
  K.Selected = !Filter || std::regex_search(K.Name, *Filter) ||
               std::regex_search(K.Demangled, *Filter);
  if (!K.Selected)
    return K; // never recorded: its code is not looked up, nor copied and hashed to name it
  // A module loaded at run time carries no IR, whatever a built-in kernel
  // of the same name does.
  K.IR = R.DriverApi ? nullptr : registry().irFor(K.Name, Arch);
  // Static identity: the kernel's name and its code (IR if carried, else
  // the application's image).
  IdentityHash H;
  H.add(K.Name);
  H.add(K.IR ? std::string_view(K.IR->Bitcode) : K.Image);
  K.StaticHash = H.hex();
  if (auto C = Unloaded.find(K.StaticHash); C != Unloaded.end()) { // the same code, reloaded
    K.Launches = C->second.Launches;
    K.Recorded = C->second.Recorded;
    K.Seen = std::move(C->second.Seen);
    K.DescriptionQueued = C->second.DescriptionQueued;
    Unloaded.erase(C);
  }
  return K;
}

void Recorder::forget(const void *DriverHandle) {
  if (!DriverHandle)
    return;
  Inside Busy;
  std::lock_guard<std::mutex> G(Lock);
  retire([&](const KernelState &K) { return K.DriverHandle == DriverHandle; });
}

void Recorder::retire(const std::function<bool(const KernelState &)> &Retired) {
  for (auto It = Kernels.begin(); It != Kernels.end();) {
    KernelState &K = It->second;
    if (!Retired(K)) {
      ++It;
      continue;
    }
    // One code may have had several states (loaded twice, or launched by
    // kernel and by function): their counts add up. A kernel the filter
    // drops was never named, and has no counts to keep.
    if (!K.StaticHash.empty()) {
      Counts &C = Unloaded[K.StaticHash];
      C.Launches += K.Launches;
      C.Recorded += K.Recorded;
      C.Seen.merge(K.Seen);
      C.DescriptionQueued |= K.DescriptionQueued;
    }
    It = Kernels.erase(It);
  }
}

void Recorder::resolveParams(KernelState &K) {
  if (K.ParamsKnown)
    return;
  K.ParamsKnown = true;
  K.Params.clear();
  if (!K.Function) {
    cudaFunction_t F = nullptr;
    if (MNEME_REAL(cudaGetFuncBySymbol)(&F, K.HostFunction) != cudaSuccess || !F)
      return;
    K.Function = reinterpret_cast<CUfunction>(F);
  }
  for (size_t I = 0;; ++I) {
    size_t Offset = 0, Size = 0;
    if (driver().FuncGetParamInfo(K.Function, I, &Offset, &Size) != CUDA_SUCCESS)
      break;
    K.Params.push_back(KernelParam{Offset, Size});
  }
}

std::string Recorder::packArgs(const KernelState &K, void **Args) const {
  uint64_t Total = 0;
  for (const KernelParam &P : K.Params)
    Total = std::max(Total, P.Offset + P.Size);
  std::string Out(Total, '\0');
  for (size_t I = 0; I < K.Params.size(); ++I)
    std::memcpy(Out.data() + K.Params[I].Offset, Args[I], K.Params[I].Size);
  return Out;
}

std::vector<std::string> Recorder::replayBlockers(const KernelState &K, const std::string &Args) {
  std::vector<std::string> Why;
  if (WindowFailed)
    Why.push_back("no VA window: allocations were served by CUDA at addresses a replay "
                  "cannot reserve");
  if (!Outside.empty())
    Why.push_back(std::to_string(Outside.size()) +
                  " live allocation(s) outside the VA window (raise --vass)");
  if (!Managed.empty())
    Why.push_back(std::to_string(Managed.size()) +
                  " live managed allocation(s); managed memory is not recorded");
  if (!K.Function)
    Why.push_back("the runtime did not resolve the kernel's function");
  // A pointer argument into device memory the snapshot does not cover.
  for (size_t I = 0; I < K.Params.size(); ++I) {
    if (K.Params[I].Size != 8)
      continue;
    uint64_t V;
    std::memcpy(&V, Args.data() + K.Params[I].Offset, 8);
    if (V < 65536 || Window.contains(V))
      continue;
    CUmemorytype Type;
    if (driver().PointerGetAttribute(&Type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, V) !=
        CUDA_SUCCESS)
      continue;
    unsigned Managed = 0;
    driver().PointerGetAttribute(&Managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, V);
    if (Managed)
      Why.push_back("argument " + std::to_string(I) + " points to managed memory");
    else if (Type == CU_MEMORYTYPE_DEVICE)
      Why.push_back("argument " + std::to_string(I) +
                    " points to device memory outside the VA window");
  }
  return Why;
}

cudaError_t Recorder::launch(const LaunchRequest &R) {
  Inside Busy;
  std::unique_lock<std::mutex> G(Lock);
  if (!start() || Instances.failed() || Finished) {
    G.unlock();
    return R.Launch();
  }
  double T0 = now();
  // A launch that is not recorded: what deciding so cost, for --verbose.
  auto PassOn = [&] {
    ++PassedOn;
    PassOnSeconds += now() - T0;
    G.unlock();
    return R.Launch();
  };
  drainFrees();
  KernelState &K = kernelState(R);
  const Options &O = options();
  if (!K.Selected || ++K.Launches <= O.Skip || K.Recorded >= O.MaxInstances)
    return PassOn();
  resolveParams(K);
  std::string Args = packArgs(K, R.Args);
  // Dynamic identity: the launch shape and the argument bytes (and the
  // rank, so ranks of one job never collide).
  IdentityHash H;
  for (unsigned V : {R.Grid.x, R.Grid.y, R.Grid.z, R.Block.x, R.Block.y, R.Block.z,
                     R.Cluster.x, R.Cluster.y, R.Cluster.z})
    H.add(V);
  H.add(R.SharedMem);
  H.add(R.Cooperative);
  H.add(Args);
  if (O.Rank >= 0)
    H.add(static_cast<uint64_t>(O.Rank));
  std::string Dynamic = H.hex();
  if (!K.Seen.insert(Dynamic).second)
    return PassOn();
  // Claim the instance: one process records it, others launch as usual.
  if (!Instances.claim(K.StaticHash, Dynamic))
    return PassOn();
  double T1 = now();
  cudaError_t Result = record(K, R, Args, Dynamic);
  double Took = now() - T1;
  RecordSeconds += Took;
  if (RecordCalls++ == 0)
    FirstRecordSeconds = Took;
  return Result;
}

std::vector<SnapshotRegion> Recorder::deviceRegions(KernelState &K,
                                                    const std::vector<VariableSymbol> &Vars) {
  std::vector<SnapshotRegion> Device;
  for (const auto &[Address, A] : Window.live())
    Device.push_back(SnapshotRegion{RegionKind::Allocation, "", Address, A.Size});
  for (const auto &[Address, Size] : Outside)
    Device.push_back(SnapshotRegion{RegionKind::Allocation, "outside-window", Address, Size});
  // A driver module's globals come with their addresses (and grow as the
  // application looks more up); a runtime module's are looked up, once
  // they all resolve.
  const uint64_t Registrations = registry().registrations();
  if (!K.Module || !K.GlobalsKnown || K.GlobalsRegistrations != Registrations) {
    std::vector<VariableSymbol> Resolved;
    bool All = true;
    for (VariableSymbol V : Vars) {
      void *Address = reinterpret_cast<void *>(V.Address);
      if (!Address &&
          MNEME_REAL(cudaGetSymbolAddress)(&Address, V.HostVariable) != cudaSuccess) {
        All = false;
        continue;
      }
      V.Address = reinterpret_cast<uint64_t>(Address);
      Resolved.push_back(std::move(V));
    }
    K.Globals = std::move(Resolved);
    K.GlobalsKnown = K.Module && All;
    K.GlobalsRegistrations = Registrations;
  }
  for (const VariableSymbol &V : K.Globals)
    Device.push_back(SnapshotRegion{RegionKind::Global, V.Name, V.Address, V.Size});
  return Device;
}

cudaError_t Recorder::record(KernelState &K, const LaunchRequest &R, const std::string &Args,
                             const std::string &Dynamic) {
  // Only a launch being recorded needs the context bound before the
  // runtime's own call binds it: the decision to record stays driver-free.
  bindRuntimeContext();
  PhaseClock Phases(PhaseSeconds);
  auto Abandon = [&](const std::string &Why) {
    Instances.abandon(K.StaticHash, Dynamic);
    if (!Why.empty())
      report("not recording " + K.Demangled + ": " + Why);
  };
  if (std::string Error; !Capture.ready(Error)) {
    report(Error + "; recording is off");
    State = Mode::PassThrough;
    Abandon("");
    return R.Launch();
  }
  Phases.mark(Phase::Setup);
  // The kernel must see exactly the memory the snapshot holds.
  if (driver().CtxSynchronize() != CUDA_SUCCESS) {
    Abandon("");
    return R.Launch();
  }
  Phases.mark(Phase::Synchronise);

  std::vector<VariableSymbol> Vars = K.Module ? registry().variables(K.Module)
                                             : registry().driverGlobals(K.DriverHandle);
  CapturedLaunch C;
  C.Regions = deviceRegions(K, Vars);
  Phases.mark(Phase::Regions);
  std::vector<std::string> Reasons = replayBlockers(K, Args);
  auto Job = std::make_unique<InstanceJob>();
  std::string Error;
  Phases.mark(Phase::Check);
  if (!Capture.prologue(C, *Job, Error)) {
    Abandon(Error);
    return R.Launch();
  }
  Phases.mark(Phase::Before);
  cudaError_t Result = cudaSuccess;
  if (!Capture.launch(R, C, Result)) {
    Abandon(Result != cudaSuccess ? "" : "the kernel failed");
    return Result;
  }
  Phases.mark(Phase::Launch);
  if (!Capture.epilogue(C, *Job, Error)) {
    Abandon(Error);
    return Result;
  }
  Phases.mark(Phase::After);

  unsigned StreamFlags = 0;
  if (R.Stream)
    driver().StreamGetFlags(reinterpret_cast<CUstream>(R.Stream), &StreamFlags);
  Instances.compose(Instance{K, R, Args, Dynamic, C, Vars, K.Image, Reasons,
                             StreamFlags, Window, DeviceName, Arch},
                    *Job);
  Phases.mark(Phase::Describe);
  Capture.handOver(C, *Job);
  ++K.Recorded;
  ++InstancesQueued;
  double T0 = now();
  Instances.submit(std::move(Job));
  SubmitSeconds += now() - T0;
  Phases.mark(Phase::Queue);
  if (options().Verbose)
    report("recorded " + K.Demangled + " instance " + Dynamic);
  return Result;
}

void Recorder::finish() {
  std::unique_lock<std::mutex> G(Lock);
  if (State != Mode::Recording || !Instances.started() || Finished)
    return;
  Finished = true;
  double T0 = now();
  // The application is done with the processors: every one it may use
  // writes what is still queued, at ordinary priority (the idle threads
  // would wait behind any other process on them), and uncompressed, since
  // the exit would otherwise wait several times as long for zstd.
  // As begin() counted them: the exiting thread's own affinity may be narrower.
  Instances.drain(WriterProcessors - WriterThreads, /*Raw=*/true);
  FinishedAt = now();
  double Wait = FinishedAt - T0;
  if (options().Verbose || InstancesQueued) {
    std::string Line = "recorded " + std::to_string(Instances.committed()) +
                       " instance(s) into " + options().Database;
    WriterStats W = Instances.writerStats();
    if (W.RawAtExitBytes >= (64ULL << 20))
      Line += " (" + std::to_string(W.RawAtExitBytes >> 20) +
              " MiB of it stored uncompressed at exit: `mneme compact -rdb '" +
              options().Database + "'` compresses it)";
    report(Line);
  }
  if (options().Verbose) {
    CaptureStats S = Capture.stats();
    char Line[384];
    std::snprintf(Line, sizeof Line,
                  "recording took %.3f s hashing on the GPU, %.3f s copying %.1f MiB to the "
                  "host in %llu runs, %.3f s queueing, %.3f s waiting for the writer at exit",
                  S.HashSeconds, S.CopySeconds, S.CopiedBytes / 1048576.0,
                  static_cast<unsigned long long>(S.CopyRuns), SubmitSeconds, Wait);
    report(Line);
    std::snprintf(Line, sizeof Line,
                  "the recorder's start took %.1f ms (%.1f ms reserving the VA window); %llu "
                  "launch(es) passed on unrecorded, %.2f us each to decide; of the start, "
                  "%.1f ms the CUDA context, %.1f ms opening the database; the writer "
                  "starts up to %u compressing threads as instances need them",
                  StartSeconds * 1e3, WindowSeconds * 1e3,
                  static_cast<unsigned long long>(PassedOn),
                  PassedOn ? PassOnSeconds / PassedOn * 1e6 : 0.0, ContextSeconds * 1e3,
                  DatabaseSeconds * 1e3, WriterProcessors);
    report(Line);
    reportTimeline(T0);
  }
}

// Instances' cost on the application's threads, and when each phase began,
// in ms from the launcher's fork (or from the recorder's load).
void Recorder::reportTimeline(double FinishBegan) const {
  char Line[320];
  std::snprintf(Line, sizeof Line,
                "%llu instance(s) took %.1f ms on the application's threads (the first %.1f "
                "ms, which sets the capture up)",
                static_cast<unsigned long long>(RecordCalls), RecordSeconds * 1e3,
                FirstRecordSeconds * 1e3);
  report(Line);
  std::string ByPhase = "the instances' time on the application's threads, by phase (ms):";
  for (size_t P = 0; P < PhaseCount; ++P) {
    std::snprintf(Line, sizeof Line, "%s %s %.1f", P ? "," : "", PhaseNames[P],
                  PhaseSeconds[P] * 1e3);
    ByPhase += Line;
  }
  report(ByPhase);
  CaptureStats C = Capture.stats();
  std::snprintf(Line, sizeof Line,
                "of it: %llu snapshot hash(es) in %llu kernel launch(es), %.1f ms issuing them, "
                "%.1f ms of them on the GPU, %.1f ms bringing the digests back (waiting for "
                "the kernels among it); the recorded kernels ran %.1f ms",
                static_cast<unsigned long long>(C.Hash.Calls),
                static_cast<unsigned long long>(C.Hash.Launches), C.Hash.IssueSeconds * 1e3,
                C.Hash.KernelSeconds * 1e3, C.Hash.DigestSeconds * 1e3, C.KernelSeconds * 1e3);
  report(Line);
  WriterStats W = Instances.writerStats();
  std::snprintf(Line, sizeof Line,
                "the writer: %.3f s copying staged bytes to the host (%u threads), %.3f s "
                "compressing and writing (%u threads), summed over the threads it started; "
                "%.1f ms setting up %u fetcher(s); %llu chunk(s), %.1f MiB, stored "
                "uncompressed at exit",
                W.FetchSeconds, W.FetchThreads, W.StoreSeconds, W.StoreThreads,
                C.FetcherSetupSeconds * 1e3, C.Fetchers,
                static_cast<unsigned long long>(W.RawAtExitChunks),
                W.RawAtExitBytes / 1048576.0);
  report(Line);
  const double Zero = options().LaunchedAt > 0 ? options().LaunchedAt : LoadedAt;
  auto Ms = [&](double T) { return (T - Zero) * 1e3; };
  std::snprintf(Line, sizeof Line,
                "timeline, ms from %s: recorder loaded %.1f, recording started %.1f, the "
                "application exited at %.1f, the writer done at %.1f",
                options().LaunchedAt > 0 ? "the launcher's fork" : "the recorder's load",
                Ms(LoadedAt), Ms(StartedAt), Ms(FinishBegan), Ms(FinishedAt));
  report(Line);
}

} // namespace mneme::recorder
