// One kernel launch as an interposed entry point hands it to the recorder.
#ifndef MNEME_RECORDER_LAUNCH_REQUEST_H
#define MNEME_RECORDER_LAUNCH_REQUEST_H

#include "CallRef.h"

#include <cuda_runtime_api.h>

#include <cstddef>

namespace mneme::recorder {

struct LaunchRequest {
  const char *Api = "cudaLaunchKernel";
  const void *Function = nullptr;
  dim3 Grid, Block, Cluster{0, 0, 0};
  void **Args = nullptr;
  size_t SharedMem = 0;
  cudaStream_t Stream = nullptr;
  bool Cooperative = false;
  // Function is a driver CUfunction or CUkernel (cuLaunchKernel*), not a
  // runtime host function.
  bool DriverApi = false;
  // The application's launch, unchanged (set it from a named callable).
  CallRef<cudaError_t> Launch;
};

// A request with the fields every launch entry point has.
inline LaunchRequest launchRequest(const char *Api, const void *Function, dim3 Grid,
                                   dim3 Block, void **Args, size_t SharedMem,
                                   cudaStream_t Stream) {
  LaunchRequest R;
  R.Api = Api;
  R.Function = Function;
  R.Grid = Grid;
  R.Block = Block;
  R.Args = Args;
  R.SharedMem = SharedMem;
  R.Stream = Stream;
  return R;
}

} // namespace mneme::recorder

#endif
