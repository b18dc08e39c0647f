// What the contention benchmarks share: an error check, the application
// loop's reduction kernel and a clock.
#pragma once
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                   \
  do {                                                                             \
    cudaError_t Err = (x);                                                         \
    if (Err) {                                                                     \
      std::printf("%s: %s\n", #x, cudaGetErrorString(Err));                       \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

__global__ void reduce(const double *X, double *Out, size_t N) {
  double S = 0;
  for (size_t I = blockIdx.x * blockDim.x + threadIdx.x; I < N; I += gridDim.x * blockDim.x)
    S += X[I];
  if (threadIdx.x == 0)
    atomicAdd(Out, S);
}

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
