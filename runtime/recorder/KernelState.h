// What the recorder knows about one kernel, keyed by its host function:
// its names and static identity (found at its first launch; a kernel the
// --kernels filter drops gets neither its IR nor an identity), its
// parameters (resolved at its first selected launch) and its counts.
#ifndef MNEME_RECORDER_KERNEL_STATE_H
#define MNEME_RECORDER_KERNEL_STATE_H

#include "Registry.h"

#include <cuda.h>

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace mneme::recorder {

// Where one parameter lies in the packed argument bytes.
struct KernelParam {
  uint64_t Offset, Size;
};

struct KernelState {
  bool Selected = false;
  const void *HostFunction = nullptr;
  std::string Name, Demangled, StaticHash;
  void **Module = nullptr;         // runtime-registered kernels
  std::string_view Image;          // the image its code came from (registry-owned)
  const void *DriverHandle = nullptr; // the CUmodule or CUlibrary of a driver launch
  CUfunction Function = nullptr;
  std::vector<KernelParam> Params;
  bool ParamsKnown = false;
  // The device addresses of its module's runtime-registered globals, looked
  // up once (they hold until the context goes or a module is registered,
  // as a library loaded again would be): a lookup is a runtime call on the
  // application's thread at every instance otherwise.
  std::vector<VariableSymbol> Globals;
  bool GlobalsKnown = false;
  uint64_t GlobalsRegistrations = 0; // the registry's count when looked up
  const IRModule *IR = nullptr;
  uint64_t Launches = 0, Recorded = 0;
  std::set<std::string> Seen; // dynamic hashes
  bool DescriptionQueued = false;
};

} // namespace mneme::recorder

#endif
