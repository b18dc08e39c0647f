// The CUDA entry points the recorder calls: the driver API, loaded from
// libcuda at first use (so the recorder links no CUDA library), and the
// application's CUDA runtime, found behind the recorder with RTLD_NEXT.
#ifndef MNEME_RECORDER_CUDA_API_H
#define MNEME_RECORDER_CUDA_API_H

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <string>

// The per-thread default stream's launch variants, which the recorder
// defines too (cuda.h declares them only under CUDA_API_PER_THREAD_DEFAULT_STREAM).
extern "C" {
CUresult cuLaunchKernel_ptsz(CUfunction F, unsigned GridX, unsigned GridY, unsigned GridZ,
                             unsigned BlockX, unsigned BlockY, unsigned BlockZ,
                             unsigned SharedMem, CUstream Stream, void **Params, void **Extra);
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *Config, CUfunction F, void **Params,
                               void **Extra);
}

namespace mneme::recorder {

// One member per driver function, named without the `cu` prefix.
struct Driver {
#define MNEME_DRIVER_FUNCTIONS(X)                                              \
  X(CtxGetCurrent, cuCtxGetCurrent)                                            \
  X(CtxGetDevice, cuCtxGetDevice)                                              \
  X(CtxSetCurrent, cuCtxSetCurrent)                                            \
  X(CtxSynchronize, cuCtxSynchronize)                                          \
  X(MemGetInfo, cuMemGetInfo)                                                  \
  X(MemcpyDtoDAsync, cuMemcpyDtoDAsync)                                        \
  X(DeviceGetAttribute, cuDeviceGetAttribute)                                  \
  X(DeviceGetName, cuDeviceGetName)                                            \
  X(DeviceTotalMem, cuDeviceTotalMem)                                          \
  X(MemGetAllocationGranularity, cuMemGetAllocationGranularity)                \
  X(MemAddressReserve, cuMemAddressReserve)                                    \
  X(MemAddressFree, cuMemAddressFree)                                          \
  X(MemCreate, cuMemCreate)                                                    \
  X(MemRelease, cuMemRelease)                                                  \
  X(MemMap, cuMemMap)                                                          \
  X(MemUnmap, cuMemUnmap)                                                      \
  X(MemSetAccess, cuMemSetAccess)                                              \
  X(MemAlloc, cuMemAlloc)                                                      \
  X(MemFree, cuMemFree)                                                        \
  X(MemAllocHost, cuMemAllocHost)                                              \
  X(MemcpyDtoHAsync, cuMemcpyDtoHAsync)                                        \
  X(MemcpyHtoDAsync, cuMemcpyHtoDAsync)                                        \
  X(MemsetD32Async, cuMemsetD32Async)                                          \
  X(StreamCreate, cuStreamCreate)                                              \
  X(StreamSynchronize, cuStreamSynchronize)                                    \
  X(EventCreate, cuEventCreate)                                                \
  X(EventRecord, cuEventRecord)                                                \
  X(EventSynchronize, cuEventSynchronize)                                      \
  X(EventQuery, cuEventQuery)                                                  \
  X(EventElapsedTime, cuEventElapsedTime)                                      \
  X(StreamIsCapturing, cuStreamIsCapturing)                                    \
  X(StreamGetFlags, cuStreamGetFlags)                                          \
  X(FuncSetAttribute, cuFuncSetAttribute)                                      \
  X(ModuleLoadData, cuModuleLoadData)                                          \
  X(ModuleUnload, cuModuleUnload)                                              \
  X(ModuleGetFunction, cuModuleGetFunction)                                    \
  X(ModuleGetGlobal, cuModuleGetGlobal)                                        \
  X(FuncGetModule, cuFuncGetModule)                                            \
  X(FuncGetParamInfo, cuFuncGetParamInfo)                                      \
  X(FuncGetName, cuFuncGetName)                                                \
  X(KernelGetFunction, cuKernelGetFunction)                                    \
  X(LibraryGetModule, cuLibraryGetModule)                                      \
  X(LaunchKernel, cuLaunchKernel)                                              \
  X(PointerGetAttribute, cuPointerGetAttribute)                                \
  X(GetErrorName, cuGetErrorName)
#define MNEME_DECLARE(Member, Function) decltype(&::Function) Member = nullptr;
  MNEME_DRIVER_FUNCTIONS(MNEME_DECLARE)
#undef MNEME_DECLARE
  bool Loaded = false;
  std::string Error; // why loading failed
};

// The driver, loaded once; check Loaded.
const Driver &driver();

// "CUDA_ERROR_OUT_OF_MEMORY" for a driver result.
std::string driverErrorName(CUresult Result);

// The application's definition of a CUDA runtime function, or null.
void *realSymbol(const char *Name);

// The driver's own definition of a driver function the recorder also
// defines (what the application's call would have reached), or null.
void *realDriverSymbol(const char *Name);

// Whether the application uses the CUDA runtime (a driver-API program
// may not load it at all).
bool hasRuntime();

// Makes the runtime's context current on a thread that has none yet (the
// runtime binds it on a thread's first call, which the recorder may
// precede), so that driver calls see the device the runtime would.
void bindRuntimeContext();

template <class F> F real(const char *Name) {
  return reinterpret_cast<F>(realSymbol(Name));
}

} // namespace mneme::recorder

// Calls the application's CUDA runtime function Name (a plain identifier).
#define MNEME_REAL(Name)                                                       \
  ([]() {                                                                      \
    static auto Fn = ::mneme::recorder::real<decltype(&::Name)>(#Name);        \
    return Fn;                                                                 \
  }())

#endif
