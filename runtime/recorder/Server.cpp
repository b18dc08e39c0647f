#include "Server.h"

#include "CudaApi.h"
#include "Options.h"
#include "Registry.h"
#include "mneme/Sha256.h"

#include <cxxabi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

namespace mneme::recorder {
namespace {

std::string demangle(const std::string &Name) {
  int Status = 0;
  char *D = abi::__cxa_demangle(Name.c_str(), nullptr, nullptr, &Status);
  std::string Out = Status == 0 && D ? D : Name;
  std::free(D);
  return Out;
}

std::string baseName(const std::string &Path) {
  size_t Slash = Path.rfind('/');
  return Slash == std::string::npos ? Path : Path.substr(Slash + 1);
}

const char *servingTable() {
  const char *V = std::getenv("MNEME_SERVE");
  return V && *V ? V : nullptr;
}

} // namespace

bool Server::enabled() {
  static const bool On = servingTable() != nullptr;
  return On;
}

Server &Server::get() {
  static Server *S = new Server; // outlives every static destructor
  return *S;
}

bool Server::load() {
  if (State != Mode::Unloaded)
    return State != Mode::Off;
  State = Mode::Off;
  std::string Error;
  if (!Table.load(servingTable(), Error)) {
    report(Error + "; every launch passes through");
    return false;
  }
  State = Mode::Loaded;
  Owner = getpid();
  return true;
}

bool Server::start() {
  if (State == Mode::Serving)
    return true;
  if (!load())
    return false;
  if (!driver().Loaded) {
    report(driver().Error + "; every launch passes through");
    State = Mode::Off;
    return false;
  }
  // The runtime starts (and registers its exit handler) on its first real
  // call; registered after it, the report runs first and can still read
  // the kernel times.
  if (hasRuntime())
    MNEME_REAL(cudaFree)(nullptr);
  std::atexit([] { Server::get().finish(); });
  State = Mode::Serving;
  return true;
}

Server::Kernel &Server::kernel(const LaunchRequest &R) {
  auto [It, New] = Kernels.try_emplace(R.Function);
  Kernel &K = It->second;
  if (!New)
    return K;
  LaunchedKernel L = registry().launched(R.Function, R.DriverApi);
  bool Known = !L.Name.empty();
  K.Name = L.Name;
  K.Module = L.Module;
  K.Image = L.Image;
  K.DriverApi = R.DriverApi;
  K.DriverHandle = L.DriverHandle;
  if (!Known)
    K.Name = "(unregistered kernel)";
  K.Demangled = Known ? demangle(K.Name) : K.Name;
  auto T = Known ? Table.Kernels.find(K.Name) : Table.Kernels.end();
  K.Table = T == Table.Kernels.end() ? nullptr : &T->second;
  return K;
}

void Server::forget(const void *DriverHandle) {
  if (!DriverHandle)
    return;
  std::lock_guard<std::mutex> G(Lock);
  for (auto It = Kernels.begin(); It != Kernels.end();) {
    auto Next = std::next(It);
    if (It->second.DriverApi && It->second.DriverHandle == DriverHandle)
      Unloaded.push_back(Kernels.extract(It));
    It = Next;
  }
  // The tuned cubins loaded beside the module, with its globals' addresses.
  for (auto &[Ctx, C] : Contexts)
    for (auto It = C.Functions.begin(); It != C.Functions.end();) {
      if (It->first.second != DriverHandle) {
        ++It;
        continue;
      }
      CUmodule Cubin = nullptr;
      if (It->second.Function && driver().FuncGetModule(&Cubin, It->second.Function) ==
                                     CUDA_SUCCESS)
        driver().ModuleUnload(Cubin);
      It = C.Functions.erase(It);
    }
}

Server::Context *Server::context(CUcontext &Ctx) {
  if (driver().CtxGetCurrent(&Ctx) != CUDA_SUCCESS || !Ctx) {
    if (hasRuntime())
      MNEME_REAL(cudaFree)(nullptr); // the runtime makes its context current
    if (driver().CtxGetCurrent(&Ctx) != CUDA_SUCCESS || !Ctx)
      return nullptr;
  }
  auto [It, New] = Contexts.try_emplace(Ctx);
  if (New) {
    CUdevice Device = 0;
    int Major = 0, Minor = 0;
    if (driver().CtxGetDevice(&Device) == CUDA_SUCCESS &&
        driver().DeviceGetAttribute(&Major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                    Device) == CUDA_SUCCESS &&
        driver().DeviceGetAttribute(&Minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                    Device) == CUDA_SUCCESS)
      It->second.Arch = "sm_" + std::to_string(Major * 10 + Minor);
  }
  return &It->second;
}

void Server::warnOnce(Kernel &K, const std::string &Why, bool Passes) {
  if (K.Warned.insert(Why).second)
    report("warning: " + K.Demangled + ": " + Why + (Passes ? "; its launches pass through" : ""));
}

const std::vector<const ServeEntry *> &Server::candidates(Kernel &K, const std::string &Arch,
                                                           std::string &Why) {
  if (auto It = K.Candidates.find(Arch); It != K.Candidates.end()) {
    Why = K.Blocked[Arch];
    return It->second;
  }
  std::vector<const ServeEntry *> Mine;
  std::set<std::string> Others;
  for (const ServeEntry *E : K.Table->Entries)
    if (E->Arch == Arch)
      Mine.push_back(E);
    else
      Others.insert(E->Arch);
  std::string Archs;
  for (const std::string &A : Others)
    Archs += (Archs.empty() ? "" : ", ") + A;
  std::string Reason;
  // A kernel tuned from IR is checked against the IR the application
  // registers, one tuned without IR against the image its code came from:
  // the digests export computed from what was recorded.
  // A module loaded at run time carries no IR, whatever a built-in kernel
  // of the same name does.
  const IRModule *IR = Mine.empty() || K.DriverApi ? nullptr : registry().irFor(K.Name, Arch);
  bool ByImage = false;
  for (const ServeEntry *E : Mine)
    ByImage = ByImage || E->ImageDigest;
  if (ByImage && K.ImageSha256.empty() && !K.Image.empty())
    K.ImageSha256 = sha256::hex(K.Image.data(), K.Image.size());
  std::string IRDigest = IR ? sha256::hex(IR->Bitcode.data(), IR->Bitcode.size()) : "";
  std::vector<const ServeEntry *> Same;
  for (const ServeEntry *E : Mine)
    if (E->IRSha256 == (E->ImageDigest ? K.ImageSha256 : IRDigest) && !E->IRSha256.empty())
      Same.push_back(E);
  if (Mine.empty())
    Reason = "tuned for another GPU (" + Archs + ", not " + Arch + ")";
  else if (Same.empty() && !IR && !ByImage)
    Reason = "the application carries no IR for it, so the bundle cannot be checked against it";
  else if (Same.empty())
    Reason = ByImage ? "the kernel's image changed since it was tuned (record and tune again)"
                     : "the kernel's IR changed since it was tuned (rebuild, record, tune again)";
  Mine.swap(Same);
  if (!Reason.empty())
    warnOnce(K, Reason);
  K.Blocked[Arch] = Reason;
  Why = Reason;
  return K.Candidates[Arch] = std::move(Mine);
}

const ServeDecision *Server::decide(Kernel &K, Context &C, const LaunchRequest &R,
                                    std::string &Why) {
  const std::vector<const ServeEntry *> &Mine = candidates(K, C.Arch, Why);
  if (Mine.empty())
    return nullptr;
  Shape Launch{R.Grid, R.Block, R.SharedMem};
  auto Key = std::make_pair(C.Arch, Launch);
  auto It = K.Decisions.find(Key);
  if (It == K.Decisions.end())
    It = K.Decisions.emplace(Key, Table.decide(Mine, Launch)).first;
  const ServeDecision &D = It->second;
  if (!D.Entry) {
    Why = D.Reason;
    return nullptr;
  }
  return &D;
}

bool Server::specialisedMatch(const Loaded &L, const ServeEntry &E, void **Args,
                              std::string &Why) {
  // A cubin specialised on argument values computes only for those values;
  // the bundle is untrusted, so each index and size is checked against the
  // tuned kernel's own parameters before an argument is read.
  for (const auto &[Index, Bytes] : E.Specialized) {
    if (Index >= L.ParamSizes.size() || L.ParamSizes[Index] != Bytes.size()) {
      Why = "the bundle specialises argument " + std::to_string(Index) +
            ", which the kernel has not with that size";
      return false;
    }
    if (!Args || !Args[Index] || std::memcmp(Args[Index], Bytes.data(), Bytes.size())) {
      Why = "argument " + std::to_string(Index) +
            " differs from the value the tuned cubin was specialised on";
      return false;
    }
  }
  return true;
}

const Server::Loaded *Server::load(Context &C, const ServeEntry &E, const Kernel &K,
                                   uint64_t SharedMem, std::string &Why) {
  auto [It, New] = C.Functions.try_emplace({&E, K.DriverApi ? K.DriverHandle : nullptr});
  Loaded &L = It->second;
  if (New && E.Cubin[0] == '!') {
    L.Why = E.Cubin.substr(1);
  } else if (New) {
    std::ifstream In(E.Cubin, std::ios::binary);
    std::string Image((std::istreambuf_iterator<char>(In)), std::istreambuf_iterator<char>());
    CUmodule Cubin = nullptr;
    CUresult Result = CUDA_SUCCESS;
    if (!In.good() && !In.eof())
      L.Why = "the tuned cubin " + baseName(E.Cubin) + " cannot be read";
    else if ((Result = driver().ModuleLoadData(&Cubin, Image.data())) != CUDA_SUCCESS)
      L.Why = "the tuned cubin " + baseName(E.Cubin) + " does not load (" +
              driverErrorName(Result) + ")";
    else if ((Result = driver().ModuleGetFunction(&L.Function, Cubin, E.Kernel.c_str())) !=
             CUDA_SUCCESS)
      L.Why = "the tuned cubin " + baseName(E.Cubin) + " lacks the kernel (" +
              driverErrorName(Result) + ")";
    else if (!copyGlobals(L, K, Cubin))
      L.Function = nullptr;
    for (size_t I = 0, Offset = 0, Size = 0; L.Function && I < 4096; ++I) {
      if (driver().FuncGetParamInfo(L.Function, I, &Offset, &Size) != CUDA_SUCCESS)
        break;
      L.ParamSizes.push_back(Size);
    }
  }
  Why = L.Why;
  if (!L.Function)
    return nullptr;
  if (SharedMem > L.MaxSharedMem) {
    // Allowed whenever asked for: the default is 48 KiB less the kernel's
    // static shared memory, and allowing more than needed is harmless.
    CUresult Result = driver().FuncSetAttribute(
        L.Function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(SharedMem));
    if (Result != CUDA_SUCCESS) {
      Why = "the tuned cubin cannot have " + std::to_string(SharedMem) +
            " bytes of dynamic shared memory (" + driverErrorName(Result) + ")";
      return nullptr;
    }
    L.MaxSharedMem = SharedMem;
  }
  return &L;
}

cudaError_t Server::passThrough(Kernel *K, const LaunchRequest &R, const std::string &Why,
                                std::unique_lock<std::mutex> &G) {
  if (Why.empty())
    ++K->NotTuned;
  else
    ++K->Passed[Why];
  Timing T;
  bool Timed = false;
  CUcontext Ctx = nullptr;
  if (Table.TimeAll || K->Table)
    if (Context *C = context(Ctx))
      Timed = timingStart(*C, Ctx, reinterpret_cast<CUstream>(R.Stream), *K, false, T);
  G.unlock();
  cudaError_t Result = R.Launch();
  if (!Timed)
    return Result;
  CUresult Stop = Result == cudaSuccess
                      ? driver().EventRecord(T.Stop, reinterpret_cast<CUstream>(R.Stream))
                      : CUDA_ERROR_LAUNCH_FAILED;
  G.lock();
  if (Stop == CUDA_SUCCESS)
    Pending.push_back(T);
  else
    recycle(T);
  if (Pending.size() > 64)
    collect(false);
  return Result;
}

cudaError_t Server::launch(const LaunchRequest &R, const char *Unserved) {
  std::unique_lock<std::mutex> G(Lock);
  if (!start()) {
    G.unlock();
    return R.Launch();
  }
  Kernel &K = kernel(R);
  ++K.Launches;
  if (!K.Table)
    return passThrough(&K, R, "", G);
  if (Unserved || R.Cooperative)
    return passThrough(&K, R, Unserved ? Unserved : "a cooperative launch", G);
  CUcontext Ctx = nullptr;
  Context *C = context(Ctx);
  std::string Why;
  const ServeDecision *D = C ? decide(K, *C, R, Why) : nullptr;
  if (!C)
    Why = "no current CUDA context";
  const Loaded *L = D ? load(*C, *D->Entry, K, D->Launch.SharedMem, Why) : nullptr;
  if (!L) {
    if (D && D->Entry->Cubin[0] != '!') // Python warned about those before the start
      warnOnce(K, Why);
    return passThrough(&K, R, Why, G);
  }
  if (!specialisedMatch(*L, *D->Entry, R.Args, Why))
    return passThrough(&K, R, Why, G);
  Shape S = D->Launch;
  CUfunction F = L->Function;
  std::vector<Global> Globals = L->Globals; // a reset may free L
  auto Stream = reinterpret_cast<CUstream>(R.Stream);
  if (CUresult In = copy(Globals, Stream, true); In != CUDA_SUCCESS) {
    Why = "the module's device globals cannot be copied to the tuned cubin (" +
          driverErrorName(In) + ")";
    warnOnce(K, Why);
    return passThrough(&K, R, Why, G);
  }
  Timing T;
  bool Timed = timingStart(*C, Ctx, Stream, K, true, T);
  G.unlock();
  CUresult Result = driver().LaunchKernel(F, S.Grid.x, S.Grid.y, S.Grid.z, S.Block.x, S.Block.y,
                                          S.Block.z, unsigned(S.SharedMem), Stream, R.Args,
                                          nullptr);
  bool Stopped = Timed && Result == CUDA_SUCCESS &&
                 driver().EventRecord(T.Stop, Stream) == CUDA_SUCCESS;
  CUresult Out = Result == CUDA_SUCCESS ? copy(Globals, Stream, false) : CUDA_SUCCESS;
  G.lock();
  if (Timed && !Stopped)
    recycle(T);
  if (Out != CUDA_SUCCESS)
    warnOnce(K, "the tuned cubin's device globals cannot be copied back (" +
                    driverErrorName(Out) + "); the application may see stale values",
             false);
  if (Result != CUDA_SUCCESS) {
    Why = "the tuned cubin's launch was refused (" + driverErrorName(Result) + ")";
    warnOnce(K, Why);
    return passThrough(&K, R, Why, G);
  }
  ++K.Served;
  if (Stopped)
    Pending.push_back(T);
  if (Pending.size() > 64)
    collect(false);
  return cudaSuccess;
}

void Server::deviceReset() {
  std::lock_guard<std::mutex> G(Lock);
  if (State != Mode::Serving)
    return;
  // The reset destroys the context, its modules and its events.
  collect(true);
  CUcontext Ctx = nullptr;
  if (driver().CtxGetCurrent(&Ctx) == CUDA_SUCCESS && Ctx)
    Contexts.erase(Ctx);
  else
    Contexts.clear();
}

void Server::finish() {
  std::lock_guard<std::mutex> G(Lock);
  if (Finished)
    return;
  Finished = true;
  // Read even when nothing was launched, so that a damaged table is
  // reported; a process that never launched a kernel writes no report.
  load();
  if (State != Mode::Serving || Table.Report.empty() || Owner != getpid())
    return;
  collect(true);
  writeReport();
}

} // namespace mneme::recorder
