// The CUDA driver API entry points the recorder interposes, for programs
// that load modules themselves (JIT compilers, driver-API programs): module
// and library loads keep the image, the globals it looks up are kept with
// their addresses, launches go to the recorder or the serving runtime, and
// device memory is served from the VA window as
// cudaMalloc's is; an unload forgets what was learnt of the handle, which
// the driver may give the next load.  Calls the CUDA runtime makes inside itself reach the
// driver directly, never these.
#include "CudaApi.h"
#include "Recorder.h"
#include "Registry.h"
#include "Server.h"

#include <cuda.h>

#include <cstring>
#include <optional>
#include <vector>

using mneme::recorder::LaunchRequest;
using mneme::recorder::Recorder;
using mneme::recorder::Server;
using mneme::recorder::registry;

namespace {

// The driver's own function behind the recorder's definition of Name.
#define MNEME_DRIVER(Name)                                                     \
  ([]() {                                                                      \
    static auto Fn = reinterpret_cast<decltype(&::Name)>(                      \
        ::mneme::recorder::realDriverSymbol(MNEME_DRIVER_SYMBOL(Name)));       \
    return Fn;                                                                 \
  }())
#define MNEME_DRIVER_SYMBOL_(X) #X
// cuda.h maps names to versioned symbols (cuMemAlloc -> cuMemAlloc_v2).
#define MNEME_DRIVER_SYMBOL(X) MNEME_DRIVER_SYMBOL_(X)

// One driver launch: the recorder sees it as a runtime launch would be,
// and the application gets the driver's own result.
template <class F>
CUresult launchThrough(const char *Api, CUfunction Function, dim3 Grid, dim3 Block,
                       unsigned SharedMem, CUstream Stream, void **Args, dim3 Cluster,
                       bool Cooperative, F Real, const char *Unserved = nullptr) {
  CUresult Result = CUDA_ERROR_UNKNOWN;
  bool Called = false;
  auto Launch = [&] {
    Called = true;
    Result = Real();
    return Result == CUDA_SUCCESS ? cudaSuccess : cudaErrorLaunchFailure;
  };
  LaunchRequest R = mneme::recorder::launchRequest(Api, Function, Grid, Block, Args, SharedMem,
                                                   reinterpret_cast<cudaStream_t>(Stream));
  R.Cluster = Cluster;
  R.Cooperative = Cooperative;
  R.DriverApi = true;
  R.Launch = Launch;
  cudaError_t E =
      Server::enabled() ? Server::get().launch(R, Unserved) : Recorder::get().launch(R);
  // Served: the tuned cubin ran in its place.
  return Called ? Result : E == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_FAILED;
}

// On a _ptsz entry point stream 0 is the calling thread's default stream:
// the recorder and the serving runtime get it by its explicit name.
CUstream streamOf(const char *Api, CUstream Stream) {
  return !Stream && std::strstr(Api, "_ptsz") ? CU_STREAM_PER_THREAD : Stream;
}

// The arguments of a launch as one pointer per parameter. Given as such
// (kernelParams), they are used as they are. Packed in one buffer (`extra`:
// CU_LAUNCH_PARAM_BUFFER_POINTER and _SIZE, as PyCUDA passes them), they
// are pointers into it at the offsets the driver gives. None at all suits
// a kernel without parameters. Nothing (not recorded, not served) when the
// buffer is missing or too small, the driver cannot say, or the caller gave
// both, which the driver refuses.
std::optional<std::vector<void *>> arguments(CUfunction F, void **Params, void **Extra) {
  if (Params && Extra)
    return std::nullopt;
  if (Params)
    return std::vector<void *>();
  void *Buffer = nullptr;
  size_t Size = 0;
  for (size_t I = 0; Extra && I < 64 && Extra[I] != CU_LAUNCH_PARAM_END; I += 2) {
    if (Extra[I] == CU_LAUNCH_PARAM_BUFFER_POINTER)
      Buffer = Extra[I + 1];
    else if (Extra[I] == CU_LAUNCH_PARAM_BUFFER_SIZE && Extra[I + 1])
      Size = *static_cast<size_t *>(Extra[I + 1]);
  }
  const mneme::recorder::Driver &Cu = mneme::recorder::driver();
  // The function itself: a library's kernel handle is not one.
  CUfunction Function = Cu.Loaded ? registry().launched(F, true).Function : nullptr;
  if (!Function || (Extra && !Buffer))
    return std::nullopt;
  std::vector<void *> Args;
  for (size_t I = 0; I < 4096; ++I) {
    size_t Offset = 0, Bytes = 0;
    if (Cu.FuncGetParamInfo(Function, I, &Offset, &Bytes) != CUDA_SUCCESS)
      break;
    if (!Extra || Offset + Bytes > Size)
      return std::nullopt; // parameters, but no arguments (or too few bytes) for them
    Args.push_back(static_cast<char *>(Buffer) + Offset);
  }
  return Args;
}

CUresult launchKernel(const char *Api, decltype(&::cuLaunchKernel) RealFn, CUfunction F,
                      unsigned GridX, unsigned GridY, unsigned GridZ, unsigned BlockX,
                      unsigned BlockY, unsigned BlockZ, unsigned SharedMem, CUstream Stream,
                      void **Params, void **Extra) {
  auto Real = [&] {
    return RealFn(F, GridX, GridY, GridZ, BlockX, BlockY, BlockZ, SharedMem, Stream, Params,
                  Extra);
  };
  // A call made on the recorder's behalf goes straight to the driver.
  if (Recorder::busy())
    return Real();
  std::optional<std::vector<void *>> Packed = arguments(F, Params, Extra);
  if (!Packed)
    return Real();
  return launchThrough(Api, F, dim3(GridX, GridY, GridZ), dim3(BlockX, BlockY, BlockZ),
                       SharedMem, streamOf(Api, Stream), Params ? Params : Packed->data(),
                       dim3(0, 0, 0), false, Real);
}

CUresult launchKernelEx(const char *Api, decltype(&::cuLaunchKernelEx) RealFn,
                        const CUlaunchConfig *Config, CUfunction F, void **Params,
                        void **Extra) {
  auto Real = [&] { return RealFn(Config, F, Params, Extra); };
  if (!Config || Recorder::busy())
    return Real();
  // The driver gets the caller's arguments still; these are the recorder's.
  std::optional<std::vector<void *>> Packed = arguments(F, Params, Extra);
  if (!Packed)
    return Real();
  dim3 Cluster(0, 0, 0);
  bool Cooperative = false;
  for (unsigned I = 0; I < Config->numAttrs; ++I) {
    const CUlaunchAttribute &A = Config->attrs[I];
    if (A.id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
      Cooperative = A.value.cooperative != 0;
    else if (A.id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
      Cluster = dim3(A.value.clusterDim.x, A.value.clusterDim.y, A.value.clusterDim.z);
  }
  return launchThrough(Api, F, dim3(Config->gridDimX, Config->gridDimY, Config->gridDimZ),
                       dim3(Config->blockDimX, Config->blockDimY, Config->blockDimZ),
                       Config->sharedMemBytes, streamOf(Api, Config->hStream),
                       Params ? Params : Packed->data(), Cluster, Cooperative, Real,
                       Config->numAttrs ? "launched with attributes (cluster, priority, ...) "
                                          "serving does not reproduce"
                                        : nullptr);
}

// A global of a module or library looked up through Real, kept with its
// address for the module's recorded instances.
template <class Handle, class F>
CUresult lookUpGlobal(F Real, CUdeviceptr *Address, size_t *Bytes, Handle Owner,
                      const char *Name) {
  size_t Size = 0;
  CUresult R = Real(Address, Bytes ? Bytes : &Size, Owner, Name);
  if (R == CUDA_SUCCESS && Address)
    registry().addDriverGlobal(Owner, Name, *Address, Bytes ? *Bytes : Size);
  return R;
}

// A module or library unloaded: the driver may hand its handle and its
// functions' addresses to a later load, so the recorder (or the serving
// runtime) and the registry forget them. After the unload succeeded: a
// failed one leaves the module loaded and known.
CUresult forgetting(const void *Handle, CUresult Unloaded) {
  if (Unloaded != CUDA_SUCCESS || !Handle)
    return Unloaded;
  if (Server::enabled())
    Server::get().forget(Handle);
  else if (!Recorder::busy())
    Recorder::get().forget(Handle);
  registry().forgetDriverHandle(Handle);
  return Unloaded;
}

CUresult fromRuntime(cudaError_t E) {
  return E == cudaSuccess ? CUDA_SUCCESS
         : E == cudaErrorMemoryAllocation ? CUDA_ERROR_OUT_OF_MEMORY
                                          : CUDA_ERROR_INVALID_VALUE;
}

} // namespace

#pragma GCC visibility push(default)
extern "C" {

CUresult cuModuleLoadData(CUmodule *Module, const void *Image) {
  CUresult R = MNEME_DRIVER(cuModuleLoadData)(Module, Image);
  if (R == CUDA_SUCCESS && Module)
    registry().addModuleImage(*Module, Image);
  return R;
}

CUresult cuModuleLoadDataEx(CUmodule *Module, const void *Image, unsigned NumOptions,
                            CUjit_option *Options, void **Values) {
  CUresult R = MNEME_DRIVER(cuModuleLoadDataEx)(Module, Image, NumOptions, Options, Values);
  if (R == CUDA_SUCCESS && Module)
    registry().addModuleImage(*Module, Image);
  return R;
}

CUresult cuModuleLoad(CUmodule *Module, const char *Path) {
  CUresult R = MNEME_DRIVER(cuModuleLoad)(Module, Path);
  if (R == CUDA_SUCCESS && Module)
    registry().addImageFile(*Module, Path, /*Library=*/false);
  return R;
}

CUresult cuLibraryLoadFromFile(CUlibrary *Library, const char *Path, CUjit_option *JitOptions,
                               void **JitValues, unsigned NumJitOptions,
                               CUlibraryOption *LibraryOptions, void **LibraryValues,
                               unsigned NumLibraryOptions) {
  CUresult R = MNEME_DRIVER(cuLibraryLoadFromFile)(Library, Path, JitOptions, JitValues,
                                                   NumJitOptions, LibraryOptions,
                                                   LibraryValues, NumLibraryOptions);
  if (R == CUDA_SUCCESS && Library)
    registry().addImageFile(*Library, Path, /*Library=*/true);
  return R;
}

CUresult cuModuleLoadFatBinary(CUmodule *Module, const void *FatBinary) {
  CUresult R = MNEME_DRIVER(cuModuleLoadFatBinary)(Module, FatBinary);
  if (R == CUDA_SUCCESS && Module)
    registry().addModuleImage(*Module, FatBinary);
  return R;
}

CUresult cuLibraryLoadData(CUlibrary *Library, const void *Code, CUjit_option *JitOptions,
                           void **JitValues, unsigned NumJitOptions,
                           CUlibraryOption *LibraryOptions, void **LibraryValues,
                           unsigned NumLibraryOptions) {
  CUresult R = MNEME_DRIVER(cuLibraryLoadData)(Library, Code, JitOptions, JitValues,
                                               NumJitOptions, LibraryOptions, LibraryValues,
                                               NumLibraryOptions);
  if (R == CUDA_SUCCESS && Library)
    registry().addLibraryImage(*Library, Code);
  return R;
}

CUresult cuModuleUnload(CUmodule Module) {
  return forgetting(Module, MNEME_DRIVER(cuModuleUnload)(Module));
}

CUresult cuLibraryUnload(CUlibrary Library) {
  return forgetting(Library, MNEME_DRIVER(cuLibraryUnload)(Library));
}

CUresult cuLibraryGetKernel(CUkernel *Kernel, CUlibrary Library, const char *Name) {
  CUresult R = MNEME_DRIVER(cuLibraryGetKernel)(Kernel, Library, Name);
  if (R == CUDA_SUCCESS && Kernel)
    registry().addLibraryKernel(*Kernel, Library, Name);
  return R;
}

CUresult cuModuleGetGlobal(CUdeviceptr *Address, size_t *Bytes, CUmodule Module,
                           const char *Name) {
  return lookUpGlobal(MNEME_DRIVER(cuModuleGetGlobal), Address, Bytes, Module, Name);
}

CUresult cuLibraryGetGlobal(CUdeviceptr *Address, size_t *Bytes, CUlibrary Library,
                            const char *Name) {
  return lookUpGlobal(MNEME_DRIVER(cuLibraryGetGlobal), Address, Bytes, Library, Name);
}

CUresult cuLaunchKernel(CUfunction F, unsigned GridX, unsigned GridY, unsigned GridZ,
                        unsigned BlockX, unsigned BlockY, unsigned BlockZ, unsigned SharedMem,
                        CUstream Stream, void **Params, void **Extra) {
  return launchKernel("cuLaunchKernel", MNEME_DRIVER(cuLaunchKernel), F, GridX, GridY, GridZ,
                      BlockX, BlockY, BlockZ, SharedMem, Stream, Params, Extra);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *Config, CUfunction F, void **Params,
                          void **Extra) {
  return launchKernelEx("cuLaunchKernelEx", MNEME_DRIVER(cuLaunchKernelEx), Config, F, Params,
                        Extra);
}

// The per-thread default stream's variants (what a lookup with
// CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM answers: programs built
// with --default-stream per-thread).
CUresult cuLaunchKernel_ptsz(CUfunction F, unsigned GridX, unsigned GridY, unsigned GridZ,
                             unsigned BlockX, unsigned BlockY, unsigned BlockZ,
                             unsigned SharedMem, CUstream Stream, void **Params, void **Extra) {
  static auto Real = reinterpret_cast<decltype(&::cuLaunchKernel)>(
      mneme::recorder::realDriverSymbol("cuLaunchKernel_ptsz"));
  if (!Real)
    return CUDA_ERROR_NOT_FOUND;
  return launchKernel("cuLaunchKernel_ptsz", Real, F, GridX, GridY, GridZ, BlockX, BlockY,
                      BlockZ, SharedMem, Stream, Params, Extra);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *Config, CUfunction F, void **Params,
                               void **Extra) {
  static auto Real = reinterpret_cast<decltype(&::cuLaunchKernelEx)>(
      mneme::recorder::realDriverSymbol("cuLaunchKernelEx_ptsz"));
  if (!Real)
    return CUDA_ERROR_NOT_FOUND;
  return launchKernelEx("cuLaunchKernelEx_ptsz", Real, Config, F, Params, Extra);
}

CUresult cuMemAlloc(CUdeviceptr *Ptr, size_t Size) {
  if (Server::enabled() || !Ptr || Recorder::busy())
    return MNEME_DRIVER(cuMemAlloc)(Ptr, Size);
  CUresult Driver = CUDA_SUCCESS;
  cudaError_t R = Recorder::get().allocate(reinterpret_cast<void **>(Ptr), Size, "cuMemAlloc",
                                           [&] {
                                             Driver = MNEME_DRIVER(cuMemAlloc)(Ptr, Size);
                                             return Driver == CUDA_SUCCESS
                                                        ? cudaSuccess
                                                        : cudaErrorMemoryAllocation;
                                           });
  return Driver != CUDA_SUCCESS ? Driver : fromRuntime(R);
}

CUresult cuMemFree(CUdeviceptr Ptr) {
  if (Server::enabled() || !Ptr || Recorder::busy())
    return MNEME_DRIVER(cuMemFree)(Ptr);
  CUresult Driver = CUDA_SUCCESS;
  cudaError_t R = Recorder::get().release(reinterpret_cast<void *>(Ptr), [&] {
    Driver = MNEME_DRIVER(cuMemFree)(Ptr);
    return Driver == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
  });
  return Driver != CUDA_SUCCESS ? Driver : fromRuntime(R);
}

} // extern "C"
#pragma GCC visibility pop
