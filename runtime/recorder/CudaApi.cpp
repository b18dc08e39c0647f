#include "CudaApi.h"

#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <string>

namespace mneme::recorder {
namespace {

#define MNEME_STRINGIFY_(X) #X
// cuda.h maps many names to versioned symbols (cuMemAlloc -> cuMemAlloc_v2);
// expanding the macro first gives the symbol the header means.
#define MNEME_SYMBOL(X) MNEME_STRINGIFY_(X)

// cuEventElapsedTime_v2 came with 12.8 drivers; older ones have the first
// version, which serves the same purpose. No other symbol falls back: the
// unversioned names of the rest have other types.
void *olderSymbol(void *Lib, const char *Name) {
  return std::strcmp(Name, "cuEventElapsedTime") == 0 ? dlsym(Lib, Name) : nullptr;
}

void *driverLibrary() {
  static void *Lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  return Lib;
}

Driver load() {
  Driver D;
  void *Lib = driverLibrary();
  if (!Lib) {
    D.Error = "cannot load libcuda.so.1 (is an NVIDIA driver installed?)";
    return D;
  }
#define MNEME_LOAD(Member, Function)                                           \
  D.Member = reinterpret_cast<decltype(D.Member)>(dlsym(Lib, MNEME_SYMBOL(Function))); \
  if (!D.Member)                                                               \
    D.Member = reinterpret_cast<decltype(D.Member)>(olderSymbol(Lib, #Function)); \
  if (!D.Member) {                                                             \
    D.Error = std::string("the driver lacks ") + MNEME_SYMBOL(Function) +      \
              " (a CUDA 12.4 or newer driver is needed)";                      \
    return D;                                                                  \
  }
  MNEME_DRIVER_FUNCTIONS(MNEME_LOAD)
#undef MNEME_LOAD
  D.Loaded = true;
  return D;
}

} // namespace

const Driver &driver() {
  static const Driver D = load();
  return D;
}

std::string driverErrorName(CUresult Result) {
  const char *Name = nullptr;
  if (driver().Loaded && driver().GetErrorName(Result, &Name) == CUDA_SUCCESS && Name)
    return Name;
  return "CUresult " + std::to_string(static_cast<int>(Result));
}

namespace {

int findCudaRuntime(dl_phdr_info *Info, size_t, void *Path) {
  if (Info->dlpi_name && std::strstr(Info->dlpi_name, "cudart.so")) {
    *static_cast<std::string *>(Path) = Info->dlpi_name;
    return 1;
  }
  return 0;
}

} // namespace

// The application's CUDA runtime is usually next in the global scope. One
// loaded only as a dependency of a library opened with RTLD_LOCAL (a Python
// extension, a plugin) is not: it is then found among the loaded objects.
void *realSymbol(const char *Name) {
  if (void *Next = dlsym(RTLD_NEXT, Name))
    return Next;
  std::string Path;
  dl_iterate_phdr(findCudaRuntime, &Path);
  void *Runtime = Path.empty() ? nullptr : dlopen(Path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  return Runtime ? dlsym(Runtime, Name) : nullptr;
}

void *realDriverSymbol(const char *Name) {
  if (void *Next = dlsym(RTLD_NEXT, Name))
    return Next;
  void *Lib = driverLibrary();
  return Lib ? dlsym(Lib, Name) : nullptr;
}

bool hasRuntime() {
  static const bool Found = realSymbol("cudaLaunchKernel") != nullptr;
  return Found;
}

void bindRuntimeContext() {
  CUcontext Current = nullptr;
  if (!driver().Loaded || (driver().CtxGetCurrent(&Current) == CUDA_SUCCESS && Current) ||
      !hasRuntime())
    return;
  static auto Free = real<decltype(&cudaFree)>("cudaFree");
  if (Free)
    Free(nullptr);
}

} // namespace mneme::recorder
