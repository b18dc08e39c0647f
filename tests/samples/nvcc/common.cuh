// Shared by the two translation units of the nvcc sample.
#pragma once
#include <cstdio>
#include <cuda_runtime.h>

#define CHECK(call)                                                              \
  do {                                                                           \
    cudaError_t err_ = (call);                                                   \
    if (err_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,                    \
                   cudaGetErrorString(err_));                                    \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

// Defined in saxpy.cu: y = a * x + y on the device.
int run_saxpy(float a, const float *x, float *y, int n);
