// A plugin that links the CUDA runtime: an application opens it with
// RTLD_LOCAL (as Python opens an extension), so its runtime is not in the
// global scope where the preloaded runtime looks first.
#include <cuda_runtime_api.h>

static void kern() {}

extern "C" int plugin_launch() {
  int N = 1;
  float *Data = nullptr;
  void *Args[] = {&Data, &N};
  return cudaLaunchKernel(reinterpret_cast<const void *>(&kern), dim3(1), dim3(32), Args, 0,
                          nullptr);
}
