// How a program finds driver functions without linking libcuda: dlsym on
// the driver's handle (JIT launchers) or cuGetProcAddress (the static CUDA
// runtime nvcc links by default, language bindings).  Both are answered
// with the recorder's definitions of the functions DriverInterpose.cpp
// interposes, so those programs' module loads, launches and allocations
// reach the recorder as a linked program's do.  Lookups made by the shared
// CUDA runtime (whose runtime calls are interposed already) and by the
// recorder itself get the driver's own functions.
#include "CudaApi.h"

#include <cuda.h>
#include <dlfcn.h>

#include <cstring>
#include <string>

extern "C" __attribute__((visibility("hidden"))) void *mneme_real_dlsym_fn(void *Handle,
                                                                           const char *Name);

namespace {

// The driver functions the recorder defines, by the names lookups use.
struct Replacement {
  const char *Name;
  void *Ours;
};

bool isOurs(const void *Caller) {
  static const void *Self = [] {
    Dl_info Info;
    return dladdr(reinterpret_cast<void *>(&isOurs), &Info) ? Info.dli_fbase : nullptr;
  }();
  Dl_info Info;
  if (!Self || !dladdr(Caller, &Info))
    return false;
  if (Info.dli_fbase == Self)
    return true;
  // The shared CUDA runtime: its launches are recorded where it is entered.
  return Info.dli_fname && std::strstr(Info.dli_fname, "libcudart.so");
}

// Whether a function is the CUDA driver's own (not another interposer's).
bool isDriver(const void *Function) {
  Dl_info Info;
  return dladdr(Function, &Info) && Info.dli_fname && std::strstr(Info.dli_fname, "libcuda.so");
}

void *replacementFor(const char *Name, bool PerThreadStream) {
  // Asked for the per-thread default stream, the launches are their _ptsz
  // variants; loads, lookups and allocations are the same either way.
  if (!Name)
    return nullptr;
  if (PerThreadStream && std::strcmp(Name, "cuLaunchKernel") == 0)
    return reinterpret_cast<void *>(&cuLaunchKernel_ptsz);
  if (PerThreadStream && std::strcmp(Name, "cuLaunchKernelEx") == 0)
    return reinterpret_cast<void *>(&cuLaunchKernelEx_ptsz);
  static const Replacement Table[] = {
      {"cuModuleLoad", reinterpret_cast<void *>(&cuModuleLoad)},
      {"cuLibraryLoadFromFile", reinterpret_cast<void *>(&cuLibraryLoadFromFile)},
      {"cuModuleLoadData", reinterpret_cast<void *>(&cuModuleLoadData)},
      {"cuModuleLoadDataEx", reinterpret_cast<void *>(&cuModuleLoadDataEx)},
      {"cuModuleLoadFatBinary", reinterpret_cast<void *>(&cuModuleLoadFatBinary)},
      {"cuLibraryLoadData", reinterpret_cast<void *>(&cuLibraryLoadData)},
      {"cuLibraryGetKernel", reinterpret_cast<void *>(&cuLibraryGetKernel)},
      {"cuModuleUnload", reinterpret_cast<void *>(&cuModuleUnload)},
      {"cuLibraryUnload", reinterpret_cast<void *>(&cuLibraryUnload)},
      {"cuModuleGetGlobal_v2", reinterpret_cast<void *>(&cuModuleGetGlobal)},
      {"cuLibraryGetGlobal", reinterpret_cast<void *>(&cuLibraryGetGlobal)},
      {"cuLaunchKernel", reinterpret_cast<void *>(&cuLaunchKernel)},
      {"cuLaunchKernelEx", reinterpret_cast<void *>(&cuLaunchKernelEx)},
      {"cuLaunchKernel_ptsz", reinterpret_cast<void *>(&cuLaunchKernel_ptsz)},
      {"cuLaunchKernelEx_ptsz", reinterpret_cast<void *>(&cuLaunchKernelEx_ptsz)},
      {"cuMemAlloc_v2", reinterpret_cast<void *>(&cuMemAlloc)},
      {"cuMemFree_v2", reinterpret_cast<void *>(&cuMemFree)},
  };
  for (const Replacement &R : Table)
    if (std::strcmp(R.Name, Name) == 0)
      return R.Ours;
  return nullptr;
}

// cuGetProcAddress as CUDA 11.3 to 11.8 define it (no status).
using GetProcAddressV1 = CUresult (*)(const char *, void **, int, cuuint64_t);
CUresult getProcAddressV1(const char *Symbol, void **Function, int CudaVersion,
                          cuuint64_t Flags);

// What a lookup by base name and CUDA version answers with, if it is one
// of the recorder's functions.
void substitute(const char *Symbol, void **Function, int CudaVersion, cuuint64_t Flags);

} // namespace

#pragma GCC visibility push(default)
extern "C" {

CUresult cuGetProcAddress(const char *Symbol, void **Function, int CudaVersion,
                          cuuint64_t Flags, CUdriverProcAddressQueryResult *Status) {
  static auto Real = reinterpret_cast<decltype(&cuGetProcAddress)>(
      mneme::recorder::realDriverSymbol("cuGetProcAddress_v2"));
  if (!Real)
    return CUDA_ERROR_NOT_INITIALIZED;
  CUresult R = Real(Symbol, Function, CudaVersion, Flags, Status);
  if (R == CUDA_SUCCESS && Function && *Function && !isOurs(__builtin_return_address(0)))
    substitute(Symbol, Function, CudaVersion, Flags);
  return R;
}

} // extern "C"
#pragma GCC visibility pop

namespace {

CUresult getProcAddressV1(const char *Symbol, void **Function, int CudaVersion,
                          cuuint64_t Flags) {
  static auto Real =
      reinterpret_cast<GetProcAddressV1>(mneme::recorder::realDriverSymbol("cuGetProcAddress"));
  if (!Real)
    return CUDA_ERROR_NOT_INITIALIZED;
  CUresult R = Real(Symbol, Function, CudaVersion, Flags);
  if (R == CUDA_SUCCESS && Function && *Function && !isOurs(__builtin_return_address(0)))
    substitute(Symbol, Function, CudaVersion, Flags);
  return R;
}

void substitute(const char *Symbol, void **Function, int CudaVersion, cuuint64_t Flags) {
  std::string Name = Symbol ? Symbol : "";
  // A program that looks cuGetProcAddress itself up (the static CUDA
  // runtime does) keeps going through the recorder.
  if (Name == "cuGetProcAddress") {
    *Function = CudaVersion >= 12000 ? reinterpret_cast<void *>(&cuGetProcAddress)
                                     : reinterpret_cast<void *>(&getProcAddressV1);
    return;
  }
  // cuMemAlloc, cuMemFree and cuModuleGetGlobal are looked up by their base
  // names; what is returned for a version from 3.2 on is the _v2 function.
  if ((Name == "cuMemAlloc" || Name == "cuMemFree" || Name == "cuModuleGetGlobal") &&
      CudaVersion >= 3020)
    Name += "_v2";
  // The per-thread default stream's launch only where the driver answered
  // with it (not for a legacy-stream request, nor before CUDA 7).
  bool PerThread = (Flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) &&
                   !(Flags & CU_GET_PROC_ADDRESS_LEGACY_STREAM) && CudaVersion >= 7000;
  if (void *Ours = replacementFor(Name.c_str(), PerThread))
    *Function = Ours;
}

} // namespace

// glibc's dlsym, found by version.
extern "C" __attribute__((visibility("hidden"))) void *(*mneme_real_dlsym)(void *,
                                                                           const char *) =
    nullptr;

// Finds it on first use, from the entry below too (before the recorder's
// constructors, those of the application's libraries may call dlsym).
extern "C" __attribute__((visibility("hidden"))) void *mneme_find_real_dlsym() {
  if (!mneme_real_dlsym) {
    void *F = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!F)
      F = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    mneme_real_dlsym = reinterpret_cast<void *(*)(void *, const char *)>(F);
  }
  return reinterpret_cast<void *>(mneme_real_dlsym);
}

extern "C" __attribute__((visibility("hidden"))) void *mneme_real_dlsym_fn(void *Handle,
                                                                           const char *Name) {
  mneme_find_real_dlsym();
  return mneme_real_dlsym ? mneme_real_dlsym(Handle, Name) : nullptr;
}

// dlsym's library handles (RTLD_NEXT and RTLD_DEFAULT go straight to the
// real dlsym: see the entry below).
extern "C" __attribute__((visibility("hidden"))) void *mneme_dlsym_other(void *Handle,
                                                                         const char *Name) {
  void *Found = mneme_real_dlsym_fn(Handle, Name);
  if (!Found || isOurs(__builtin_return_address(0)) || !isDriver(Found))
    return Found;
  if (Name && std::strcmp(Name, "cuGetProcAddress_v2") == 0)
    return reinterpret_cast<void *>(&cuGetProcAddress);
  if (Name && std::strcmp(Name, "cuGetProcAddress") == 0)
    return reinterpret_cast<void *>(&getProcAddressV1);
  if (void *Ours = replacementFor(Name, false))
    return Ours;
  return Found;
}

__attribute__((constructor)) static void findRealDlsymEarly() { mneme_find_real_dlsym(); }

#if defined(__x86_64__)
// dlsym itself: a jump, not a call, so that glibc still sees the caller's
// return address, which RTLD_NEXT ("after the caller") and RTLD_DEFAULT
// (the caller's scope) depend on; both go straight to glibc. Other handles
// go through mneme_dlsym_other.
asm(R"(
  .text
  .globl dlsym
  .type dlsym, @function
dlsym:
  movq mneme_real_dlsym(%rip), %rax
  testq %rax, %rax
  jnz 2f
  pushq %rdi
  pushq %rsi
  subq $8, %rsp
  call mneme_find_real_dlsym
  addq $8, %rsp
  popq %rsi
  popq %rdi
  testq %rax, %rax
  jz 1f
2:
  cmpq $-1, %rdi
  je 3f
  testq %rdi, %rdi
  jne 1f
3:
  jmp *%rax
1:
  jmp mneme_dlsym_other
  .size dlsym, .-dlsym
)");
#endif
