#include <cstdio>

#include "portable.h"

// A static table the host fills by name: clang renames it under separable
// compilation, and its device uses must follow.
static __constant__ float c_offset[2];

__global__ void axpy(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = a * x[i] + y[i] + c_offset[i & 1];  // small integers: exact in float
}

__global__ void hashed(int n, const float *y, unsigned *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = mix(static_cast<unsigned>(y[i]));
}

void run_mixed(int n, float scale, int rounds, long long *sum) {
  // Host code using CUDA's min/max overloads, as nvcc's headers provide them.
  float a = min(max(scale, 1.0f), 2.0f);
  int r = max(1, min(rounds, 8));
  float *x, *y;
  unsigned *h;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  cudaMalloc(&h, n * sizeof(unsigned));
  float *init = new float[n];
  for (int i = 0; i < n; ++i)
    init[i] = static_cast<float>(i % 100);
  cudaMemcpy(x, init, n * sizeof(float), cudaMemcpyHostToDevice);
  delete[] init;
  cudaMemset(y, 0, n * sizeof(float));
  const float offsets[2] = {1.0f, 2.0f};
  cudaMemcpyToSymbol(c_offset, offsets, sizeof(offsets));
  for (int k = 0; k < r; ++k)
    axpy<<<(n + 255) / 256, 256>>>(n, a, x, y);
  hashed<<<(n + 255) / 256, 256>>>(n, y, h);
  unsigned *back = new unsigned[n];
  cudaMemcpy(back, h, n * sizeof(unsigned), cudaMemcpyDeviceToHost);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    std::printf("mixed: %s\n", cudaGetErrorString(err));
  *sum = 0;
  for (int i = 0; i < n; ++i)
    *sum += back[i] % 1000;
  delete[] back;
  cudaFree(x);
  cudaFree(y);
  cudaFree(h);
}
