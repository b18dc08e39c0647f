// What the application registers with the CUDA runtime (fatbinaries,
// kernels, device variables) and the device IR its modules hand over
// through the registration hook.  Filled from constructors, read at launch.
#ifndef MNEME_RECORDER_REGISTRY_H
#define MNEME_RECORDER_REGISTRY_H

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <deque>
#include <vector>

namespace mneme::recorder {

struct KernelSymbol {
  std::string Name;     // mangled, as the device image names it
  void **Module = nullptr; // fatbinary handle
  const void *HostFunction = nullptr;
};

struct VariableSymbol {
  std::string Name;
  void **Module = nullptr;
  const void *HostVariable = nullptr;
  uint64_t Size = 0;
  bool Constant = false;
  // A global of a module loaded through the driver: its device address
  // (the application looked it up, to read or write it).
  uint64_t Address = 0;
};

// One embedded-IR record (one TU, or the module linked from several, for
// one arch).
struct IRModule {
  std::string Metadata; // JSON, as the plugin or the IR link wrote it
  std::string Bitcode;
  std::string Arch;     // "sm_90"
  bool Linked = false;  // linked from relocatable device code
  bool defines(const std::string &Kernel) const;
};

// The kernel a launch names, whichever API launched it.
struct LaunchedKernel {
  std::string Name;                   // mangled; empty when the launch is unknown here
  void **Module = nullptr;            // a runtime-registered kernel's fatbinary handle
  std::string_view Image;             // the image its code came from (PTX, cubin, fatbinary)
  CUfunction Function = nullptr;      // a driver launch's function in this context
  const void *DriverHandle = nullptr; // the CUmodule or CUlibrary of a driver launch
};

class Registry {
public:
  // Modules and libraries loaded through the driver API: their images are
  // copied (the application may free its buffer once loaded).
  void addModuleImage(CUmodule Module, const void *Image);
  void addLibraryImage(CUlibrary Library, const void *Image);
  void addLibraryKernel(CUkernel Kernel, CUlibrary Library, const char *Name);
  // A module or library the driver loaded from a file: the file's bytes.
  void addImageFile(const void *Handle, const char *Path, bool Library);
  // A module or library unloaded: its handle, kernels and globals are
  // forgotten (the image copy stays: recorded kernels hold views of it).
  void forgetDriverHandle(const void *Handle);
  // What a launch names: a runtime host function, or (DriverApi) a
  // CUfunction of a loaded module or a CUkernel.
  LaunchedKernel launched(const void *Function, bool DriverApi) const;
  // A global of a module or library the application looked up.
  void addDriverGlobal(const void *Handle, const char *Name, uint64_t Address, uint64_t Size);
  std::vector<VariableSymbol> driverGlobals(const void *Handle) const;

  void addFatBinary(void **Handle, const void *Wrapper);
  void addFunction(void **Handle, const void *HostFunction, const char *DeviceName);
  void addVariable(void **Handle, const void *HostVariable, const char *DeviceName,
                   uint64_t Size, bool Constant);
  // Decodes the records one module hands to its registration hook (either version).
  void addIR(const void *Data, uint64_t Size);

  // CUDA 13's nvcc launches through kernel handles (__cudaGetKernel).
  void addKernelHandle(const void *Handle, const void *HostFunction);
  const void *hostFunctionOf(const void *Handle) const;

  const KernelSymbol *kernel(const void *HostFunction) const;
  std::vector<VariableSymbol> variables(void **Module) const;
  // How many fat binaries and variables the runtime has registered so far:
  // a change means a module came (or came back) since.
  uint64_t registrations() const { return Registrations.load(); }
  // The IR defining Kernel, preferring Arch, then a linked module; null if
  // no module carries it.
  const IRModule *irFor(const std::string &Kernel, const std::string &Arch) const;
  // The application's compiled image of a module (empty if unknown).
  std::string_view image(void **Module) const;
  size_t irModuleCount() const;

private:
  void addImage(const void *Handle, const void *Image);
  void keepImage(const void *Handle, std::string Copy);
  LaunchedKernel driverKernel(CUfunction Function) const;
  // The loaded module or library a handle stands for (a library's module:
  // the library); the handle itself if none. Under Lock.
  const void *owner(const void *Handle) const;

  mutable std::mutex Lock;
  std::map<void **, std::string_view> Images;
  std::map<const void *, KernelSymbol> Kernels;
  std::map<const void *, const void *> Handles; // kernel handle -> host function
  std::vector<VariableSymbol> Variables;
  std::atomic<uint64_t> Registrations{0};
  std::deque<IRModule> IR; // stable addresses for irFor()
  // CUmodule or CUlibrary -> image; images are kept for the process's life
  // (kernels recorded from them hold views), a handle reused points anew.
  std::deque<std::string> ImageCopies;
  std::map<const void *, std::string_view> DriverImages;
  std::set<const void *> Libraries; // the CUlibrary handles among them
  mutable std::map<const void *, const void *> Owners; // a library's module -> the library
  std::map<const void *, std::pair<const void *, std::string>> LibraryKernels;
  std::map<const void *, std::map<std::string, VariableSymbol>> DriverGlobals;
};

Registry &registry();

} // namespace mneme::recorder

#endif
