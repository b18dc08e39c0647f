#include "Recorder.h"

#include "CudaApi.h"
#include "Json.h"
#include "Options.h"
#include "Registry.h"

#include <cxxabi.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
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

std::string toHexBytes(const std::string &Bytes) {
  static const char Digits[] = "0123456789abcdef";
  std::string Out;
  for (unsigned char C : Bytes) {
    Out += Digits[C >> 4];
    Out += Digits[C & 15];
  }
  return Out;
}

// Identity of content: a hash over a few values and a byte string.
struct IdentityHash {
  std::string Bytes;
  void add(uint64_t V) { Bytes.append(reinterpret_cast<const char *>(&V), 8); }
  void add(const std::string &S) {
    add(S.size());
    Bytes += S;
  }
  std::string hex() const { return hex64(content_hash::hash(Bytes.data(), Bytes.size()).Hi); }
};

void writeDim(JsonWriter &J, const char *Key, dim3 D) {
  J.key(Key).beginArray().value(D.x).value(D.y).value(D.z).endArray();
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string isoNow() {
  std::time_t T = std::time(nullptr);
  char Buf[32];
  std::strftime(Buf, sizeof Buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&T));
  return Buf;
}

} // namespace

Recorder &Recorder::get() {
  static Recorder *R = new Recorder; // outlives every static destructor
  return *R;
}

bool Recorder::start() {
  if (State != Mode::Unstarted)
    return State == Mode::Recording;
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
  // The runtime creates the primary context on its first real call.
  MNEME_REAL(cudaFree)(nullptr);
  driver().CtxGetCurrent(&Context);
  // Registered after the runtime's own exit handler, so it runs first:
  // instances still on their way to the host need the context.
  std::atexit([] { Recorder::get().finish(); });
  std::string Error;
  if (!store::initDatabase(O.Database, Error)) {
    report(Error + "; recording is off, the application runs unrecorded");
    return false;
  }
  openWindow();

  int Device = 0;
  MNEME_REAL(cudaGetDevice)(&Device);
  int Major = 0, Minor = 0;
  MNEME_REAL(cudaDeviceGetAttribute)(&Major, cudaDevAttrComputeCapabilityMajor, Device);
  MNEME_REAL(cudaDeviceGetAttribute)(&Minor, cudaDevAttrComputeCapabilityMinor, Device);
  Arch = "sm_" + std::to_string(Major * 10 + Minor);
  char Name[256] = {0};
  if (driver().DeviceGetName(Name, sizeof Name, Device) == CUDA_SUCCESS)
    DeviceName = Name;
  MNEME_REAL(cudaEventCreate)(&Start);
  MNEME_REAL(cudaEventCreate)(&Stop);
  unsigned Threads = std::min(8u, std::max(1u, std::thread::hardware_concurrency() / 2));
  Writer = std::make_unique<DatabaseWriter>(O.Database, O.ZstdLevel, Threads);
  State = Mode::Recording;
  return true;
}

bool Recorder::openWindow() {
  const Options &O = options();
  std::string Error;
  if (Window.open(O.VABase, O.VASize, O.VABaseGiven, Error)) {
    WindowFailed = false;
    if (Window.base() != O.VABase)
      report("the VA window is at " + hex64(Window.base()) + " (the base asked for was taken)");
    return true;
  }
  WindowFailed = true;
  report(Error + "; allocations are served by CUDA and instances are not replayable");
  return false;
}

Recorder::KernelState &Recorder::kernelState(const void *Function) {
  auto [It, New] = Kernels.try_emplace(Function);
  KernelState &K = It->second;
  if (!New)
    return K;
  const KernelSymbol *S = registry().kernel(Function);
  if (!S) {
    K.Selected = false; // launched through a handle the runtime did not register
    return K;
  }
  K.Name = S->Name;
  K.Module = S->Module;
  K.Demangled = demangle(K.Name);
  K.HostFunction = Function;
  K.Selected = !Filter || std::regex_search(K.Name, *Filter) ||
               std::regex_search(K.Demangled, *Filter);
  K.IR = registry().irFor(K.Name, Arch);
  // Static identity: the kernel's name and its code (IR if carried, else
  // the application's image).
  IdentityHash H;
  H.add(K.Name);
  if (K.IR)
    H.add(K.IR->Bitcode);
  else
    H.add(std::string(registry().image(K.Module)));
  K.StaticHash = H.hex();
  return K;
}

void Recorder::resolveParams(KernelState &K) {
  if (K.ParamsKnown)
    return;
  K.ParamsKnown = true;
  K.Params.clear();
  cudaFunction_t F = nullptr;
  if (MNEME_REAL(cudaGetFuncBySymbol)(&F, K.HostFunction) != cudaSuccess || !F)
    return;
  K.Function = reinterpret_cast<CUfunction>(F);
  for (size_t I = 0;; ++I) {
    size_t Offset = 0, Size = 0;
    if (driver().FuncGetParamInfo(K.Function, I, &Offset, &Size) != CUDA_SUCCESS)
      break;
    K.Params.push_back(Param{Offset, Size});
  }
}

std::string Recorder::packArgs(const KernelState &K, void **Args) const {
  uint64_t Total = 0;
  for (const Param &P : K.Params)
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

bool Recorder::storeChunks(const std::vector<Region> &Regions,
                           const std::vector<std::vector<Digest>> &Digests,
                           const std::vector<std::vector<bool>> *Changed, InstanceJob &Job,
                           std::vector<StagedCopy> &Staged, std::string &Error) {
  const uint64_t ChunkSize = options().ChunkSize;
  const std::string &Db = options().Database;
  for (size_t R = 0; R < Regions.size(); ++R) {
    const Region &Rg = Regions[R];
    const std::vector<Digest> &D = Digests[R];
    // Which chunks the store lacks; consecutive ones are copied together.
    std::vector<bool> Need(D.size(), false);
    for (size_t I = 0; I < D.size(); ++I) {
      if (Changed && !(*Changed)[R][I])
        continue;
      if (KnownChunks.count(D[I]))
        continue;
      KnownChunks.insert(D[I]);
      struct stat St;
      if (stat((Db + "/" + store::chunkPath(D[I])).c_str(), &St) == 0)
        continue; // another process or run stored it
      Need[I] = true;
    }
    for (size_t I = 0; I < D.size();) {
      if (!Need[I]) {
        ++I;
        continue;
      }
      size_t End = I;
      while (End < D.size() && Need[End])
        ++End;
      uint64_t From = I * ChunkSize;
      uint64_t Bytes = std::min<uint64_t>(End * ChunkSize, Rg.Size) - From;
      HostBuffer Buffer = allocateHostBuffer(Bytes);
      CUdeviceptr Copy = 0;
      if (StagedBytes + Bytes <= StagingCap && Snapshot.stage(Rg.Address + From, Bytes, Copy)) {
        StagedBytes += Bytes;
        Staged.push_back(StagedCopy{Copy, Bytes, Buffer});
      } else if (!Snapshot.copyToHost(Rg.Address + From, Bytes, Buffer.get(), Error)) {
        return false;
      }
      for (size_t C = I; C < End; ++C) {
        uint64_t Offset = (C - I) * ChunkSize;
        Job.Chunks.push_back(
            ChunkTask{D[C], Buffer, Offset, std::min<uint64_t>(ChunkSize, Bytes - Offset)});
      }
      Job.HostBytes += Bytes;
      CopiedBytes += Bytes;
      ++CopyRuns;
      I = End;
    }
  }
  return true;
}

cudaError_t Recorder::launch(const LaunchRequest &R) {
  std::unique_lock<std::mutex> G(Lock);
  if (!start() || (Writer && Writer->failed())) {
    G.unlock();
    return R.Launch();
  }
  drainFrees();
  KernelState &K = kernelState(R.Function);
  const Options &O = options();
  if (!K.Selected || ++K.Launches <= O.Skip || K.Recorded >= O.MaxInstances) {
    G.unlock();
    return R.Launch();
  }
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
  if (!K.Seen.insert(Dynamic).second) {
    G.unlock();
    return R.Launch();
  }
  // Claim the instance: one process records it, others launch as usual.
  std::string Claim = O.Database + "/index/" + K.StaticHash + "." + Dynamic + ".claim";
  int Fd = open(Claim.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (Fd < 0) {
    G.unlock();
    return R.Launch();
  }
  std::string Pid = std::to_string(getpid()) + "\n";
  if (write(Fd, Pid.data(), Pid.size()) < 0) {
  }
  close(Fd);
  cudaError_t Result = record(K, R, Args, Dynamic);
  return Result;
}

std::string Recorder::describeKernel(const KernelState &K, const std::vector<VariableSymbol> &Vars,
                                     std::string_view AppImage) const {
  JsonWriter KJ;
  KJ.beginObject()
      .field("format", "mneme-kernel")
      .field("version", static_cast<uint64_t>(store::FormatVersion))
      .field("static_hash", K.StaticHash)
      .field("name", K.Name)
      .field("demangled", K.Demangled)
      .field("has_ir", K.IR != nullptr);
  if (K.IR) {
    KJ.key("ir")
        .beginObject()
        .field("file", "RecordedIR_" + K.StaticHash + ".bc")
        .field("bytes", static_cast<uint64_t>(K.IR->Bitcode.size()))
        .field("content_hash",
               content_hash::toHex(
                   content_hash::hash(K.IR->Bitcode.data(), K.IR->Bitcode.size())))
        .key("metadata")
        .raw(K.IR->Metadata)
        .endObject();
  } else {
    KJ.key("ir").null();
  }
  if (!AppImage.empty())
    KJ.key("image")
        .beginObject()
        .field("file", "Image." + K.StaticHash + ".mneme")
        .field("bytes", static_cast<uint64_t>(AppImage.size()))
        .endObject();
  else
    KJ.key("image").null();
  KJ.key("params").beginArray();
  for (const Param &P : K.Params)
    KJ.beginObject().field("offset", P.Offset).field("size", P.Size).endObject();
  KJ.endArray();
  KJ.key("globals").beginArray();
  for (const VariableSymbol &V : Vars)
    KJ.beginObject()
        .field("name", V.Name)
        .field("size", V.Size)
        .field("constant", V.Constant)
        .endObject();
  KJ.endArray().endObject();
  return KJ.str();
}

cudaError_t Recorder::record(KernelState &K, const LaunchRequest &R, const std::string &Args,
                             const std::string &Dynamic) {
  const Options &O = options();
  const std::string Claim = "index/" + K.StaticHash + "." + Dynamic + ".claim";
  auto Abandon = [&](const std::string &Why) {
    unlink((O.Database + "/" + Claim).c_str());
    if (!Why.empty())
      report("not recording " + K.Demangled + ": " + Why);
  };
  // The hash kernel and the staging memory, at the first recorded launch.
  if (!SnapshotReady) {
    std::string Error;
    if (!Snapshot.init(Error)) {
      report(Error + "; recording is off");
      State = Mode::PassThrough;
      Abandon("");
      return R.Launch();
    }
    SnapshotReady = true;
    size_t Free = 0, Total = 0;
    driver().MemGetInfo(&Free, &Total);
    StagingCap = std::min<uint64_t>(4ULL << 30, Free / 4);
  }
  // The kernel must see exactly the memory the snapshot holds.
  cudaError_t Sync = MNEME_REAL(cudaDeviceSynchronize)();
  if (Sync != cudaSuccess) {
    Abandon("");
    return R.Launch();
  }

  // Every live allocation, the module's device globals, the arguments.
  std::vector<Region> Device;
  for (const auto &[Address, A] : Window.live())
    Device.push_back(Region{static_cast<uint32_t>(RegionKind::Allocation), "", Address, A.Size});
  for (const auto &[Address, Size] : Outside)
    Device.push_back(Region{static_cast<uint32_t>(RegionKind::Allocation), "outside-window",
                            Address, Size});
  std::vector<VariableSymbol> Vars = registry().variables(K.Module);
  for (const VariableSymbol &V : Vars) {
    void *Address = nullptr;
    if (MNEME_REAL(cudaGetSymbolAddress)(&Address, V.HostVariable) != cudaSuccess)
      continue;
    Device.push_back(Region{static_cast<uint32_t>(RegionKind::Global), V.Name,
                            reinterpret_cast<uint64_t>(Address), V.Size});
  }
  std::vector<DeviceRange> Ranges;
  for (const Region &Rg : Device)
    Ranges.push_back(DeviceRange{Rg.Address, Rg.Size});
  std::vector<std::string> Reasons = replayBlockers(K, Args);

  auto Job = std::make_unique<InstanceJob>();
  std::string Error;
  std::vector<std::vector<Digest>> Before, After;
  std::vector<StagedCopy> Staged;
  double T0 = now();
  bool Hashed = Snapshot.hash(Ranges, O.ChunkSize, Before, Error);
  double T1 = now();
  HashSeconds += T1 - T0;
  // Staged copies complete before the kernel may change what they copy.
  bool Copied = Hashed && storeChunks(Device, Before, nullptr, *Job, Staged, Error) &&
                Snapshot.wait(Error);
  CopySeconds += now() - T1;
  auto Unstage = [&] {
    for (const StagedCopy &S : Staged) {
      Snapshot.release(S.Copy);
      StagedBytes -= S.Bytes;
    }
  };
  if (!Copied) {
    Unstage();
    Abandon(Error);
    return R.Launch();
  }

  // The launch itself, timed on the application's stream. A 100 us spin on
  // the stream first keeps the start event from being reached before the
  // launch is issued, so the interval is the kernel's execution and not the
  // host's launch latency. (A host-opened gate would be exact, but a stream
  // held by the host can deadlock against the runtime's implicit
  // synchronisations in other threads.)
  Snapshot.hold(reinterpret_cast<CUstream>(R.Stream), 100000);
  MNEME_REAL(cudaEventRecord)(Start, R.Stream);
  cudaError_t Result = R.Launch();
  MNEME_REAL(cudaEventRecord)(Stop, R.Stream);
  cudaError_t Done = MNEME_REAL(cudaDeviceSynchronize)();
  if (Result != cudaSuccess || Done != cudaSuccess) {
    Unstage();
    Abandon(Result != cudaSuccess ? "" : "the kernel failed");
    return Result;
  }
  float Ms = 0;
  MNEME_REAL(cudaEventElapsedTime)(&Ms, Start, Stop);

  // The epilogue keeps only the chunks the kernel changed.
  std::vector<std::vector<bool>> Changed;
  uint64_t ChangedBytes = 0, RawBytes = Args.size();
  T0 = now();
  if (!Snapshot.hash(Ranges, O.ChunkSize, After, Error)) {
    Unstage();
    Abandon(Error);
    return Result;
  }
  HashSeconds += now() - T0;
  for (size_t I = 0; I < Device.size(); ++I) {
    RawBytes += Device[I].Size;
    Changed.emplace_back(After[I].size());
    for (size_t C = 0; C < After[I].size(); ++C)
      if (After[I][C] != Before[I][C]) {
        Changed[I][C] = true;
        ChangedBytes += std::min<uint64_t>(O.ChunkSize, Device[I].Size - C * O.ChunkSize);
      }
  }
  T0 = now();
  if (!storeChunks(Device, After, &Changed, *Job, Staged, Error) || !Snapshot.wait(Error)) {
    Unstage();
    Abandon(Error);
    return Result;
  }
  CopySeconds += now() - T0;

  // Argument bytes and (once per kernel) the application's image.
  Digest ArgsHash = content_hash::hash(Args.data(), Args.size());
  if (!KnownChunks.count(ArgsHash)) {
    KnownChunks.insert(ArgsHash);
    HostBuffer Buffer = allocateHostBuffer(Args.size());
    std::memcpy(Buffer.get(), Args.data(), Args.size());
    Job->Chunks.push_back(ChunkTask{ArgsHash, Buffer, 0, Args.size()});
  }
  store::State Image;
  std::string_view AppImage = registry().image(K.Module);
  bool Describe = !K.DescriptionQueued;
  if (Describe && !AppImage.empty()) {
    Image.Kind = store::StateKind::Image;
    Image.ChunkSize = O.ChunkSize;
    store::Region Rg;
    Rg.Kind = RegionKind::Image;
    Rg.Name = "fatbin";
    Rg.Size = AppImage.size();
    HostBuffer Buffer = allocateHostBuffer(AppImage.size());
    std::memcpy(Buffer.get(), AppImage.data(), AppImage.size());
    for (uint64_t C = 0; C * O.ChunkSize < AppImage.size(); ++C) {
      uint64_t Size = std::min<uint64_t>(O.ChunkSize, AppImage.size() - C * O.ChunkSize);
      Digest D = content_hash::hash(AppImage.data() + C * O.ChunkSize, Size);
      Rg.Chunks.push_back(store::ChunkRef{C, D});
      if (KnownChunks.insert(D).second)
        Job->Chunks.push_back(ChunkTask{D, Buffer, C * O.ChunkSize, Size});
    }
    Image.Regions.push_back(std::move(Rg));
  }

  // Manifests.
  store::State Prologue, Epilogue;
  Prologue.Kind = store::StateKind::Prologue;
  Epilogue.Kind = store::StateKind::Epilogue;
  Prologue.ChunkSize = Epilogue.ChunkSize = O.ChunkSize;
  for (size_t I = 0; I < Device.size(); ++I) {
    store::Region P;
    P.Kind = static_cast<RegionKind>(Device[I].Kind);
    P.Name = Device[I].Name;
    P.Address = Device[I].Address;
    P.Size = Device[I].Size;
    store::Region E = P;
    for (uint64_t C = 0; C < Before[I].size(); ++C) {
      P.Chunks.push_back(store::ChunkRef{C, Before[I][C]});
      if (Changed[I][C])
        E.Chunks.push_back(store::ChunkRef{C, After[I][C]});
    }
    Prologue.Regions.push_back(std::move(P));
    Epilogue.Regions.push_back(std::move(E));
  }
  store::Region ArgRegion;
  ArgRegion.Kind = RegionKind::Arguments;
  ArgRegion.Name = "arguments";
  ArgRegion.Size = Args.size();
  if (!Args.empty())
    ArgRegion.Chunks.push_back(store::ChunkRef{0, ArgsHash});
  Prologue.Regions.push_back(ArgRegion);

  // The instance's description, embedded in the prologue and indexed.
  unsigned StreamFlags = 0;
  if (R.Stream)
    MNEME_REAL(cudaStreamGetFlags)(R.Stream, &StreamFlags);
  const std::string Base = K.StaticHash + "." + Dynamic + ".mneme";
  const std::string PrologueFile = "DeviceState.prologue." + Base;
  const std::string EpilogueFile = "DeviceState.epilogue." + Base;
  char Host[256] = {0};
  gethostname(Host, sizeof Host - 1);
  JsonWriter J;
  J.beginObject()
      .field("format", "mneme-instance")
      .field("version", static_cast<uint64_t>(store::FormatVersion))
      .field("kernel", K.Name)
      .field("demangled", K.Demangled)
      .field("static_hash", K.StaticHash)
      .field("dynamic_hash", Dynamic)
      .field("has_ir", K.IR != nullptr);
  J.key("launch").beginObject().field("api", R.Api);
  writeDim(J, "grid", R.Grid);
  writeDim(J, "block", R.Block);
  if (R.Cluster.x)
    writeDim(J, "cluster", R.Cluster);
  else
    J.key("cluster").null();
  J.field("shared_mem_bytes", static_cast<uint64_t>(R.SharedMem))
      .field("cooperative", R.Cooperative)
      .field("stream_flags", StreamFlags)
      .field("default_stream", R.Stream == nullptr)
      .endObject();
  J.key("params").beginArray();
  for (const Param &P : K.Params)
    J.beginObject().field("offset", P.Offset).field("size", P.Size).endObject();
  J.endArray();
  J.field("args_hex", toHexBytes(Args))
      .field("launch_index", K.Launches)
      .field("in_app_ms", static_cast<double>(Ms))
      .field("replayable", Reasons.empty());
  J.key("reasons").beginArray();
  for (const std::string &Why : Reasons)
    J.value(Why);
  J.endArray();
  J.key("window")
      .beginObject()
      .field("base", Window.base())
      .field("size", Window.size())
      .field("granularity", Window.granularity())
      .endObject();
  J.key("device")
      .beginObject()
      .field("ordinal", Window.device())
      .field("name", DeviceName)
      .field("arch", Arch)
      .endObject();
  J.key("process")
      .beginObject()
      .field("pid", static_cast<int64_t>(getpid()))
      .field("rank", O.Rank)
      .field("host", Host)
      .endObject();
  J.field("recorded_at", isoNow())
      .field("prologue", PrologueFile)
      .field("epilogue", EpilogueFile)
      .field("raw_bytes", RawBytes)
      .field("changed_bytes", ChangedBytes);
  std::string Description = J.str(); // closed by the index entry below
  Prologue.Metadata = Description + "}";
  Epilogue.Metadata = Prologue.Metadata;

  // The kernel's description, once per kernel and process.
  std::string KernelJson, IRFile;
  if (Describe) {
    K.DescriptionQueued = true;
    KernelJson = describeKernel(K, Vars, AppImage);
    if (K.IR)
      IRFile = "RecordedIR_" + K.StaticHash + ".bc";
  }

  std::string PrologueData = store::encodeState(Prologue);
  std::string EpilogueData = store::encodeState(Epilogue);
  std::string ImageData = Image.Regions.empty() ? "" : store::encodeState(Image);
  std::string IRBitcode = K.IR && Describe ? K.IR->Bitcode : "";
  std::string Static = K.StaticHash;
  std::string Entry = "index/" + K.StaticHash + "." + Dynamic + ".json";
  Job->RemoveAfter.push_back(Claim);
  if (!Staged.empty())
    Job->Fetch = [this, Staged](std::string &Error) { return fetch(Staged, Error); };
  Job->Files = [=](uint64_t Stored) {
    std::vector<OutputFile> Files;
    if (!IRBitcode.empty())
      Files.push_back(OutputFile{IRFile, IRBitcode, true});
    if (!ImageData.empty())
      Files.push_back(OutputFile{"Image." + Static + ".mneme", ImageData, true});
    if (!KernelJson.empty())
      Files.push_back(OutputFile{Static + ".json", KernelJson, true});
    Files.push_back(OutputFile{PrologueFile, PrologueData, false});
    Files.push_back(OutputFile{EpilogueFile, EpilogueData, false});
    Files.push_back(OutputFile{Entry, Description + ",\"stored_bytes\":" +
                                          std::to_string(Stored) + "}",
                               false});
    return Files;
  };
  ++K.Recorded;
  ++InstancesQueued;
  T0 = now();
  Writer->submit(std::move(Job));
  SubmitSeconds += now() - T0;
  if (O.Verbose)
    report("recorded " + K.Demangled + " instance " + Dynamic);
  return Result;
}

bool Recorder::fetch(const std::vector<StagedCopy> &Staged, std::string &Error) {
  driver().CtxSetCurrent(Context);
  if (!FetcherReady) {
    if (!Fetcher.init(Error, 4ULL << 20))
      return false;
    FetcherReady = true;
  }
  bool Ok = true;
  for (const StagedCopy &S : Staged) {
    Ok = Ok && Fetcher.copyToHost(S.Copy, S.Bytes, S.Buffer.get(), Error);
    Fetcher.release(S.Copy);
    StagedBytes -= S.Bytes;
  }
  return Ok;
}

void Recorder::finish() {
  std::unique_lock<std::mutex> G(Lock);
  if (State != Mode::Recording || !Writer || Finished)
    return;
  Finished = true;
  double T0 = now();
  Writer->drain();
  double Wait = now() - T0;
  if (options().Verbose || InstancesQueued)
    report("recorded " + std::to_string(Writer->committed()) + " instance(s) into " +
           options().Database);
  if (options().Verbose) {
    char Line[256];
    std::snprintf(Line, sizeof Line,
                  "recording took %.3f s hashing on the GPU, %.3f s copying %.1f MiB to the "
                  "host in %llu runs, %.3f s queueing, %.3f s waiting for the writer at exit",
                  HashSeconds, CopySeconds, CopiedBytes / 1048576.0,
                  static_cast<unsigned long long>(CopyRuns), SubmitSeconds, Wait);
    report(Line);
  }
}

} // namespace mneme::recorder
