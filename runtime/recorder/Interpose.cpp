// The CUDA runtime entry points the recorder interposes.  Each one either
// hands the call to the Recorder or forwards it unchanged to the
// application's runtime (found with RTLD_NEXT).
#include "CudaApi.h"
#include "Recorder.h"
#include "Registry.h"
#include "Server.h"

#include <cuda_runtime_api.h>

using mneme::recorder::LaunchRequest;
using mneme::recorder::launchRequest;
using mneme::recorder::Recorder;
using mneme::recorder::Server;
using mneme::recorder::real;
using mneme::recorder::registry;

// The library is built with hidden visibility; what follows is its interface.
#pragma GCC visibility push(default)

// Registration entry points: not in the public headers; their shapes are
// fixed by what nvcc and clang emit.
extern "C" {
void **__cudaRegisterFatBinary(void *FatCubin);
void __cudaRegisterFatBinaryEnd(void **Handle);
void __cudaRegisterFunction(void **Handle, const char *HostFun, char *DeviceFun,
                            const char *DeviceName, int ThreadLimit, uint3 *Tid,
                            uint3 *Bid, dim3 *BlockDim, dim3 *GridDim, int *WarpSize);
void __cudaRegisterVar(void **Handle, char *HostVar, char *DeviceAddress,
                       const char *DeviceName, int Ext, size_t Size, int Constant,
                       int Global);
void __mneme_register_ir_v1(const void *Data, uint64_t Size);
void __mneme_register_ir_v2(const void *Data, uint64_t Size);
cudaError_t __cudaGetKernel(cudaKernel_t *Kernel, const void *HostFunction);
cudaError_t __cudaLaunchKernel(cudaKernel_t Kernel, dim3 Grid, dim3 Block, void **Args,
                               size_t SharedMem, cudaStream_t Stream);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t Kernel, dim3 Grid, dim3 Block, void **Args,
                                    size_t SharedMem, cudaStream_t Stream);
cudaError_t cudaLaunchKernel_ptsz(const void *Func, dim3 Grid, dim3 Block, void **Args,
                                  size_t SharedMem, cudaStream_t Stream);
}

namespace {

// One launch of Func through Real, which is the application's own call.
template <class F>
cudaError_t launchThrough(const char *Api, const void *Func, dim3 Grid, dim3 Block, void **Args,
                          size_t SharedMem, cudaStream_t Stream, bool PerThread, F Real) {
  // The _ptsz entry points read stream 0 as the per-thread default stream.
  LaunchRequest R = launchRequest(Api, Func, Grid, Block, Args, SharedMem,
                                  PerThread && !Stream ? cudaStreamPerThread : Stream);
  R.Launch = Real;
  return Server::enabled() ? Server::get().launch(R) : Recorder::get().launch(R);
}

// A launch through a kernel handle from __cudaGetKernel.
template <class F>
cudaError_t launchByHandle(cudaKernel_t Kernel, dim3 Grid, dim3 Block, void **Args,
                           size_t SharedMem, cudaStream_t Stream, bool PerThread, F Real) {
  const void *Func = registry().hostFunctionOf(Kernel);
  if (!Func)
    return Real();
  return launchThrough("__cudaLaunchKernel", Func, Grid, Block, Args, SharedMem, Stream,
                       PerThread, Real);
}

} // namespace

extern "C" {

void **__cudaRegisterFatBinary(void *FatCubin) {
  void **Handle = MNEME_REAL(__cudaRegisterFatBinary)(FatCubin);
  registry().addFatBinary(Handle, FatCubin);
  return Handle;
}

void __cudaRegisterFatBinaryEnd(void **Handle) {
  MNEME_REAL(__cudaRegisterFatBinaryEnd)(Handle);
}

void __cudaRegisterFunction(void **Handle, const char *HostFun, char *DeviceFun,
                            const char *DeviceName, int ThreadLimit, uint3 *Tid,
                            uint3 *Bid, dim3 *BlockDim, dim3 *GridDim, int *WarpSize) {
  MNEME_REAL(__cudaRegisterFunction)(Handle, HostFun, DeviceFun, DeviceName, ThreadLimit,
                                     Tid, Bid, BlockDim, GridDim, WarpSize);
  registry().addFunction(Handle, HostFun, DeviceName);
}

void __cudaRegisterVar(void **Handle, char *HostVar, char *DeviceAddress,
                       const char *DeviceName, int Ext, size_t Size, int Constant,
                       int Global) {
  MNEME_REAL(__cudaRegisterVar)(Handle, HostVar, DeviceAddress, DeviceName, Ext, Size,
                                Constant, Global);
  registry().addVariable(Handle, HostVar, DeviceName, Size, Constant != 0);
}

// Called by the constructors mneme-cc adds to recordable binaries; the
// decoder reads both versions' records.
void __mneme_register_ir_v2(const void *Data, uint64_t Size) {
  registry().addIR(Data, Size);
}

void __mneme_register_ir_v1(const void *Data, uint64_t Size) {
  registry().addIR(Data, Size);
}

cudaError_t cudaMalloc(void **DevPtr, size_t Size) {
  if (Server::enabled())
    return MNEME_REAL(cudaMalloc)(DevPtr, Size);
  return Recorder::get().allocate(DevPtr, Size, "cudaMalloc", [&] {
    return MNEME_REAL(cudaMalloc)(DevPtr, Size);
  });
}

cudaError_t cudaMallocAsync(void **DevPtr, size_t Size, cudaStream_t Stream) {
  if (Server::enabled())
    return MNEME_REAL(cudaMallocAsync)(DevPtr, Size, Stream);
  return Recorder::get().allocate(DevPtr, Size, "cudaMallocAsync", [&] {
    return MNEME_REAL(cudaMallocAsync)(DevPtr, Size, Stream);
  });
}

cudaError_t cudaMallocFromPoolAsync(void **Ptr, size_t Size, cudaMemPool_t Pool,
                                    cudaStream_t Stream) {
  if (Server::enabled())
    return MNEME_REAL(cudaMallocFromPoolAsync)(Ptr, Size, Pool, Stream);
  return Recorder::get().allocate(Ptr, Size, "cudaMallocFromPoolAsync", [&] {
    return MNEME_REAL(cudaMallocFromPoolAsync)(Ptr, Size, Pool, Stream);
  });
}

cudaError_t cudaMallocPitch(void **DevPtr, size_t *Pitch, size_t Width, size_t Height) {
  if (Server::enabled())
    return MNEME_REAL(cudaMallocPitch)(DevPtr, Pitch, Width, Height);
  // Rows start on 512-byte boundaries, as the runtime's own pitch does.
  size_t Row = (Width + 511) / 512 * 512;
  bool Served = false;
  cudaError_t R = Recorder::get().allocate(DevPtr, Row * Height, "cudaMallocPitch", [&] {
    Served = true;
    return MNEME_REAL(cudaMallocPitch)(DevPtr, Pitch, Width, Height);
  });
  if (!Served && R == cudaSuccess && Pitch)
    *Pitch = Row;
  return R;
}

cudaError_t cudaMallocManaged(void **DevPtr, size_t Size, unsigned int Flags) {
  if (Server::enabled())
    return MNEME_REAL(cudaMallocManaged)(DevPtr, Size, Flags);
  cudaError_t R = MNEME_REAL(cudaMallocManaged)(DevPtr, Size, Flags);
  if (R == cudaSuccess && DevPtr && *DevPtr)
    Recorder::get().noteManaged(*DevPtr, Size);
  return R;
}

cudaError_t cudaFree(void *DevPtr) {
  if (Server::enabled())
    return MNEME_REAL(cudaFree)(DevPtr);
  if (!DevPtr)
    return MNEME_REAL(cudaFree)(DevPtr);
  return Recorder::get().release(DevPtr, [&] { return MNEME_REAL(cudaFree)(DevPtr); });
}

cudaError_t cudaFreeAsync(void *DevPtr, cudaStream_t Stream) {
  if (Server::enabled())
    return MNEME_REAL(cudaFreeAsync)(DevPtr, Stream);
  if (!DevPtr)
    return MNEME_REAL(cudaFreeAsync)(DevPtr, Stream);
  return Recorder::get().releaseAsync(DevPtr, Stream, [&] {
    return MNEME_REAL(cudaFreeAsync)(DevPtr, Stream);
  });
}

cudaError_t cudaDeviceReset(void) {
  if (Server::enabled())
    Server::get().deviceReset();
  else
    Recorder::get().deviceReset();
  return MNEME_REAL(cudaDeviceReset)();
}

cudaError_t cudaLaunchKernel(const void *Func, dim3 Grid, dim3 Block, void **Args,
                             size_t SharedMem, cudaStream_t Stream) {
  return launchThrough("cudaLaunchKernel", Func, Grid, Block, Args, SharedMem, Stream, false,
                       [&] {
                         return MNEME_REAL(cudaLaunchKernel)(Func, Grid, Block, Args, SharedMem,
                                                             Stream);
                       });
}

cudaError_t cudaLaunchKernel_ptsz(const void *Func, dim3 Grid, dim3 Block, void **Args,
                                  size_t SharedMem, cudaStream_t Stream) {
  return launchThrough("cudaLaunchKernel", Func, Grid, Block, Args, SharedMem, Stream, true,
                       [&] {
                         return MNEME_REAL(cudaLaunchKernel_ptsz)(Func, Grid, Block, Args,
                                                                  SharedMem, Stream);
                       });
}

// nvcc 13's launch stubs: a kernel handle looked up once, then launched.
cudaError_t __cudaGetKernel(cudaKernel_t *Kernel, const void *HostFunction) {
  cudaError_t R = MNEME_REAL(__cudaGetKernel)(Kernel, HostFunction);
  if (R == cudaSuccess && Kernel)
    registry().addKernelHandle(*Kernel, HostFunction);
  return R;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t Kernel, dim3 Grid, dim3 Block, void **Args,
                               size_t SharedMem, cudaStream_t Stream) {
  return launchByHandle(Kernel, Grid, Block, Args, SharedMem, Stream, false, [&] {
    return MNEME_REAL(__cudaLaunchKernel)(Kernel, Grid, Block, Args, SharedMem, Stream);
  });
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t Kernel, dim3 Grid, dim3 Block, void **Args,
                                    size_t SharedMem, cudaStream_t Stream) {
  return launchByHandle(Kernel, Grid, Block, Args, SharedMem, Stream, true, [&] {
    return MNEME_REAL(__cudaLaunchKernel_ptsz)(Kernel, Grid, Block, Args, SharedMem, Stream);
  });
}

cudaError_t cudaLaunchCooperativeKernel(const void *Func, dim3 Grid, dim3 Block, void **Args,
                                        size_t SharedMem, cudaStream_t Stream) {
  LaunchRequest R =
      launchRequest("cudaLaunchCooperativeKernel", Func, Grid, Block, Args, SharedMem, Stream);
  R.Cooperative = true;
  auto Real = [&] {
    return MNEME_REAL(cudaLaunchCooperativeKernel)(Func, Grid, Block, Args, SharedMem, Stream);
  };
  R.Launch = Real;
  return Server::enabled() ? Server::get().launch(R) : Recorder::get().launch(R);
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *Config, const void *Func,
                                void **Args) {
  if (!Config)
    return MNEME_REAL(cudaLaunchKernelExC)(Config, Func, Args);
  LaunchRequest R = launchRequest("cudaLaunchKernelExC", Func, Config->gridDim,
                                  Config->blockDim, Args, Config->dynamicSmemBytes,
                                  Config->stream);
  for (unsigned I = 0; I < Config->numAttrs; ++I) {
    const cudaLaunchAttribute &A = Config->attrs[I];
    if (A.id == cudaLaunchAttributeCooperative)
      R.Cooperative = A.val.cooperative != 0;
    else if (A.id == cudaLaunchAttributeClusterDimension)
      R.Cluster = dim3(A.val.clusterDim.x, A.val.clusterDim.y, A.val.clusterDim.z);
  }
  auto Real = [&] { return MNEME_REAL(cudaLaunchKernelExC)(Config, Func, Args); };
  R.Launch = Real;
  if (Server::enabled())
    return Server::get().launch(R, Config->numAttrs ? "launched with attributes (cluster, "
                                                      "priority, ...) serving does not "
                                                      "reproduce" : nullptr);
  return Recorder::get().launch(R);
}

} // extern "C"
#pragma GCC visibility pop

namespace {
// Waits for the writer when the application exits normally.
struct FinishAtExit {
  ~FinishAtExit() {
    if (Server::enabled())
      Server::get().finish();
    else
      Recorder::get().finish();
  }
} Finish;
} // namespace
