// A small CUDA application split the way real codes are: a static library,
// a shared library, two translation units that share a file name, and a
// main TU with kernels of its own.  Every value is an integer or an exactly
// representable float, so every compiler must print the same output.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(call)                                                            \
  do {                                                                         \
    cudaError_t err_ = (call);                                                 \
    if (err_ != cudaSuccess) {                                                 \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,                  \
                   cudaGetErrorString(err_));                                  \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

// scale/kernels.cu (static library)
void launch_scale_float(float *data, int n, float factor);
void launch_scale_int(int *data, int n, int factor);
// stencil/kernels.cu (shared library)
void launch_stencil(const float *in, float *out, int n);
