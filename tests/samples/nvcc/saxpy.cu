// The first translation unit: one kernel and the host function that launches it.
#include "common.cuh"

__global__ void saxpy(float a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

int run_saxpy(float a, const float *x, float *y, int n) {
  saxpy<<<(n + 255) / 256, 256>>>(a, x, y, n);
  CHECK(cudaGetLastError());
  return 0;
}
