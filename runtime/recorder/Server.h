// Serving mode (`mneme run --tuned BUNDLE -- APP`): the runtime records
// nothing; each launch of a bundled kernel whose arch, IR and launch shape
// match is launched from the tuned cubin with its geometry, every other
// launch goes to the application's runtime untouched.  Per kernel it counts
// launches served and passed through (with the reason) and sums kernel time,
// and at exit writes the report Python prints (docs/deploy.md).
#ifndef MNEME_RECORDER_SERVER_H
#define MNEME_RECORDER_SERVER_H

#include "LaunchRequest.h"
#include "ServeTable.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <sys/types.h>

#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace mneme::recorder {

class Server {
public:
  // True when MNEME_SERVE names a serving table: the recorder stays off.
  static bool enabled();
  static Server &get();

  // Attributes: a launch with attributes serving does not reproduce.
  cudaError_t launch(const LaunchRequest &R, const char *Unserved = nullptr);
  // A module or library is being unloaded: its kernels leave the lookup
  // (the driver may reuse their handles) and stay in the report.
  void forget(const void *DriverHandle);
  void deviceReset();
  // Collects the last kernel times and writes the report (once).
  void finish();

private:
  struct Kernel {
    std::string Name, Demangled;
    void **Module = nullptr;            // the application's fatbinary handle
    std::string_view Image;             // the image its code came from
    bool DriverApi = false;             // a function of a module loaded through the driver
    const void *DriverHandle = nullptr; // its CUmodule or CUlibrary
    std::string ImageSha256;            // of Image, once an entry asks
    const ServeKernel *Table = nullptr; // null: not in the bundle
    uint64_t Launches = 0, Served = 0, NotTuned = 0, ServedTimed = 0, PassedTimed = 0;
    double ServedMs = 0, PassedMs = 0;
    std::map<std::string, uint64_t> Passed; // reason -> launches
    // Per arch: the entries whose arch and IR match, or why none does.
    std::map<std::string, std::vector<const ServeEntry *>> Candidates;
    std::map<std::string, std::string> Blocked;
    std::map<std::pair<std::string, Shape>, ServeDecision> Decisions;
    std::set<std::string> Warned;
  };
  // A device global of the application's module and the cubin's copy of
  // it: the cubin is a module of its own, so the values travel with each
  // launch (in before it, and out after it unless constant).
  struct Global {
    CUdeviceptr App = 0, Cubin = 0;
    size_t Bytes = 0;
    bool Constant = false;
  };
  struct Loaded {
    CUfunction Function = nullptr;
    std::vector<Global> Globals;
    std::vector<size_t> ParamSizes; // the tuned kernel's parameters, in order
    std::string Why; // when it did not load
    uint64_t MaxSharedMem = 0; // dynamic shared memory the function was allowed
  };
  struct Context {
    std::string Arch;
    // A tuned cubin per entry and, for a driver-API kernel, per application
    // module: its globals are that module's (a reloaded module has others).
    std::map<std::pair<const ServeEntry *, const void *>, Loaded> Functions;
    std::vector<CUevent> Events; // free for reuse
  };
  struct Timing {
    CUcontext Ctx = nullptr;
    CUevent Start = nullptr, Stop = nullptr;
    Kernel *K = nullptr;
    bool Served = false;
  };

  bool load();  // the table, once, under Lock; false: every launch passes through
  bool start(); // load() and the CUDA runtime's own start, under Lock
  Kernel &kernel(const LaunchRequest &R);
  Context *context(CUcontext &Ctx);
  // The decision for this launch, or a reason in Why.
  const ServeDecision *decide(Kernel &K, Context &C, const LaunchRequest &R, std::string &Why);
  const std::vector<const ServeEntry *> &candidates(Kernel &K, const std::string &Arch,
                                                     std::string &Why);
  // The entry's cubin loaded in C, ready for SharedMem bytes; null and Why if not.
  const Loaded *load(Context &C, const ServeEntry &E, const Kernel &K, uint64_t SharedMem,
                     std::string &Why);
  bool copyGlobals(Loaded &L, const Kernel &K, CUmodule Cubin);
  // Whether the launch's arguments are those the cubin was specialised on.
  static bool specialisedMatch(const Loaded &L, const ServeEntry &E, void **Args,
                               std::string &Why);
  static CUresult copy(const std::vector<Global> &Globals, CUstream S, bool In);
  void warnOnce(Kernel &K, const std::string &Why, bool Passes = true);
  bool timingStart(Context &C, CUcontext Ctx, CUstream S, Kernel &K, bool Served, Timing &T);
  void collect(bool Wait);
  void recycle(const Timing &T); // its events back to its context's pool
  cudaError_t passThrough(Kernel *K, const LaunchRequest &R, const std::string &Why,
                          std::unique_lock<std::mutex> &G);
  void writeReport();

  std::mutex Lock;
  enum class Mode { Unloaded, Off, Loaded, Serving } State = Mode::Unloaded;
  bool Finished = false;
  pid_t Owner = 0; // the process that loaded the table: a forked child reports nothing
  ServeTable Table;
  std::unordered_map<const void *, Kernel> Kernels; // by host function
  // Kernels of unloaded modules, for the report: nodes keep their
  // addresses, which pending timings hold.
  std::vector<decltype(Kernels)::node_type> Unloaded;
  std::map<CUcontext, Context> Contexts;
  std::deque<Timing> Pending; // launches whose time is not read yet
};

} // namespace mneme::recorder

#endif
