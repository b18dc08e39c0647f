// A stand-in for the CUDA runtime (libcudart) behind the serving runtime:
// registration keeps the kernel names, a launch prints that it ran the
// application's own kernel, and device globals have made-up addresses.
#include <cstddef>
#include <cstdio>
#include <map>
#include <string>

struct dim3 {
  unsigned x, y, z;
};

static std::map<const void *, std::string> &names() {
  static std::map<const void *, std::string> Names;
  return Names;
}

extern "C" {

void **__cudaRegisterFatBinary(void *) {
  static void *Handle;
  return &Handle;
}

void __cudaRegisterFatBinaryEnd(void **) {}

void __cudaRegisterFunction(void **, const char *HostFun, char *, const char *DeviceName, int,
                            void *, void *, void *, void *, int *) {
  names()[HostFun] = DeviceName;
}

void __cudaRegisterVar(void **, char *, char *, const char *, int, size_t, int, int) {}

// Device globals live at 0xa0 plus their host variable's first byte.
int cudaGetSymbolAddress(void **Address, const void *Symbol) {
  *Address = reinterpret_cast<void *>(0xa0 + *static_cast<const unsigned char *>(Symbol));
  return 0;
}

int cudaFree(void *) { return 0; }

// Every launch entry point ends here; they never call each other, since a
// call between exported functions would reach the preloaded runtime again.
static int launchNative(const void *Function, dim3 Grid, dim3 Block, void **Args, size_t Smem) {
  std::printf("native %s %u,%u,%u %u,%u,%u %zu n=%d\n", names()[Function].c_str(), Grid.x,
              Grid.y, Grid.z, Block.x, Block.y, Block.z, Smem, *static_cast<int *>(Args[1]));
  return 0;
}

int cudaLaunchKernel(const void *Function, dim3 Grid, dim3 Block, void **Args, size_t Smem,
                     void *) {
  return launchNative(Function, Grid, Block, Args, Smem);
}

// cudaLaunchKernelExC's configuration, as cuda_runtime_api.h lays it out.
struct LaunchConfig {
  dim3 Grid, Block;
  size_t Smem;
  void *Stream;
  void *Attrs;
  unsigned NumAttrs;
};

int cudaLaunchKernelExC(const LaunchConfig *Config, const void *Function, void **Args) {
  return launchNative(Function, Config->Grid, Config->Block, Args, Config->Smem);
}

// Kernel handles (nvcc 13's launch stubs): the handle is the host function.
int __cudaGetKernel(const void **Handle, const void *Function) {
  *Handle = Function;
  return 0;
}

int __cudaLaunchKernel(const void *Handle, dim3 Grid, dim3 Block, void **Args, size_t Smem,
                       void *) {
  return launchNative(Handle, Grid, Block, Args, Smem);
}

} // extern "C"
