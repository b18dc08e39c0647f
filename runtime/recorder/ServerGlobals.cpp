// The device globals a tuned cubin shares with the application: found when
// the cubin is loaded, copied in before each served launch and out after it.
#include "Server.h"

#include "CudaApi.h"
#include "Registry.h"

#include <algorithm>

namespace mneme::recorder {

bool Server::copyGlobals(Loaded &L, const Kernel &K, CUmodule Cubin) {
  // A registered module's variables, or those of a driver-loaded module the
  // application looked up (the others keep the image's values in both).
  std::vector<VariableSymbol> Vars = K.DriverApi ? registry().driverGlobals(K.DriverHandle)
                                                 : registry().variables(K.Module);
  for (const VariableSymbol &V : Vars) {
    Global G;
    G.Constant = V.Constant;
    // A global the compiled kernel does not use was dropped from the cubin.
    if (driver().ModuleGetGlobal(&G.Cubin, &G.Bytes, Cubin, V.Name.c_str()) != CUDA_SUCCESS)
      continue;
    void *App = reinterpret_cast<void *>(V.Address);
    if (!App && (MNEME_REAL(cudaGetSymbolAddress)(&App, V.HostVariable) != cudaSuccess || !App)) {
      L.Why = "the application's device global " + V.Name + " cannot be found";
      return false;
    }
    G.App = reinterpret_cast<CUdeviceptr>(App);
    G.Bytes = std::min<size_t>(G.Bytes, V.Size);
    L.Globals.push_back(G);
  }
  return true;
}

CUresult Server::copy(const std::vector<Global> &Globals, CUstream S, bool In) {
  for (const Global &G : Globals) {
    if (!In && G.Constant)
      continue;
    CUresult R = In ? driver().MemcpyDtoDAsync(G.Cubin, G.App, G.Bytes, S)
                    : driver().MemcpyDtoDAsync(G.App, G.Cubin, G.Bytes, S);
    if (R != CUDA_SUCCESS)
      return R;
  }
  return CUDA_SUCCESS;
}

} // namespace mneme::recorder
