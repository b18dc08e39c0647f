// The recorder's allocation side: device memory served from the VA window
// (or by CUDA, when the window cannot serve it), stream-ordered frees, and
// the allocations a replay cannot restore (managed, outside the window).
#include "CudaApi.h"
#include "Options.h"
#include "Recorder.h"

#include <cstring>

namespace mneme::recorder {

cudaError_t Recorder::allocate(void **Ptr, size_t Size, const char *Api,
                               CallRef<cudaError_t> Real) {
  Inside Busy;
  std::lock_guard<std::mutex> G(Lock);
  if (!Ptr || Size == 0 || !start())
    return Real();
  bindRuntimeContext();
  drainFrees();
  CUdevice Device = -1;
  driver().CtxGetDevice(&Device);
  bool Trimmed = false; // the staging memory, once, where the device was full
  if (!WindowFailed && Window.isOpen() && Device == Window.device()) {
    uint64_t At = 0;
    CUresult Err;
    auto Outcome = Window.allocate(Size, 256, At, Err);
    if (Outcome == VAWindow::Outcome::DriverError) { // the device may be full of staging
      Capture.trimStaging();
      Trimmed = true;
      Outcome = Window.allocate(Size, 256, At, Err);
    }
    if (Outcome == VAWindow::Outcome::Ok) {
      *Ptr = reinterpret_cast<void *>(At);
      return cudaSuccess;
    }
    if (Outcome == VAWindow::Outcome::DoesNotFit && !ReportedOverflow) {
      ReportedOverflow = true;
      report(std::string(Api) + "(" + std::to_string(Size) +
             " bytes) does not fit in the VA window (" + std::to_string(Window.liveBytes()) +
             " of " + std::to_string(Window.size()) +
             " bytes in use); it is served outside the window and launches while it is "
             "live are not replayable: raise --vass");
    }
    // Out of device memory (or no room): let CUDA answer, as it would have.
  }
  cudaError_t Result = Real();
  if (Result == cudaErrorMemoryAllocation && State == Mode::Recording && !Trimmed) {
    // Staging may hold the memory: trim it and try again, with the runtime's
    // error from the first try cleared (a driver call leaves none).
    Capture.trimStaging();
    if (std::strncmp(Api, "cuda", 4) == 0)
      if (auto ClearError = MNEME_REAL(cudaGetLastError))
        ClearError();
    Result = Real();
  }
  if (Result == cudaSuccess)
    Outside[reinterpret_cast<uint64_t>(*Ptr)] = Size;
  return Result;
}

cudaError_t Recorder::release(void *Ptr, CallRef<cudaError_t> Real) {
  Inside Busy;
  std::lock_guard<std::mutex> G(Lock);
  uint64_t P = reinterpret_cast<uint64_t>(Ptr);
  if (State == Mode::Recording && Window.isOpen() && Window.contains(P)) {
    bindRuntimeContext();
    drainFrees();
    // cudaFree waits for the device; unmapping needs that too.
    driver().CtxSynchronize();
    return Window.release(P) ? cudaSuccess : cudaErrorInvalidValue;
  }
  Outside.erase(P);
  Managed.erase(P);
  return Real();
}

void CUDART_CB Recorder::onStreamFree(void *Data) {
  auto *Address = static_cast<uint64_t *>(Data);
  Recorder &R = get();
  {
    std::lock_guard<std::mutex> G(R.FreesLock);
    R.ReadyFrees.push_back(*Address);
  }
  delete Address;
}

void Recorder::drainFrees() {
  std::vector<uint64_t> Ready;
  {
    std::lock_guard<std::mutex> G(FreesLock);
    Ready.swap(ReadyFrees);
  }
  for (uint64_t P : Ready)
    Window.release(P);
}

cudaError_t Recorder::releaseAsync(void *Ptr, cudaStream_t Stream,
                                   CallRef<cudaError_t> Real) {
  Inside Busy;
  std::lock_guard<std::mutex> G(Lock);
  uint64_t P = reinterpret_cast<uint64_t>(Ptr);
  if (State == Mode::Recording && Window.isOpen() && Window.contains(P)) {
    if (!Window.find(P) || Window.find(P)->Address != P)
      return cudaErrorInvalidValue;
    // Freed when the stream reaches this point, as cudaFreeAsync promises.
    return MNEME_REAL(cudaLaunchHostFunc)(Stream, onStreamFree, new uint64_t(P));
  }
  Outside.erase(P);
  return Real();
}

void Recorder::noteManaged(void *Ptr, size_t Size) {
  std::lock_guard<std::mutex> G(Lock);
  if (!start())
    return;
  Managed[reinterpret_cast<uint64_t>(Ptr)] = Size;
  if (!ReportedManaged) {
    ReportedManaged = true;
    report("cudaMallocManaged: managed memory is not recorded; launches while it is live "
           "are recorded as not replayable");
  }
}

void Recorder::deviceReset() {
  std::lock_guard<std::mutex> G(Lock);
  if (State != Mode::Recording)
    return;
  // The reset destroys the context and with it every mapping: start over.
  Instances.drain();
  Window = VAWindow();
  Outside.clear();
  Managed.clear();
  // Driver-API kernels die with the context (their handles may come back
  // for others); runtime kernels are registered again under the same keys.
  retire([](const KernelState &K) { return K.DriverHandle != nullptr; });
  for (auto &[F, K] : Kernels)
    K.Function = nullptr, K.ParamsKnown = false, K.GlobalsKnown = false;
  State = Mode::Unstarted;
  Capture.reset();
}

} // namespace mneme::recorder
