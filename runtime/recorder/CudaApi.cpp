#include "CudaApi.h"

#include <dlfcn.h>

#include <cstring>

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

Driver load() {
  Driver D;
  void *Lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
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

void *realSymbol(const char *Name) { return dlsym(RTLD_NEXT, Name); }

} // namespace mneme::recorder
