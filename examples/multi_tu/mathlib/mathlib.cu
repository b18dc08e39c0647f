#include "mathlib.h"

__constant__ float c_table[4] = {0.25f, 0.5f, 1.0f, 2.0f};

template <typename T> __global__ void affine(T *y, const T *x, T a, T b, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = a * x[i] + b;
}

__global__ void lookup(float *out, const int *index, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] *= c_table[index[i] & 3];
}

void mathlib_affine(float *y, const float *x, float a, float b, int n) {
  affine<float><<<128, 256>>>(y, x, a, b, n);
}

void mathlib_lookup(float *out, const int *index, int n) {
  lookup<<<(n + 255) / 256, 256>>>(out, index, n);
}
