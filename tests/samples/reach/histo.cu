#include "portable.h"

__global__ void histogram(int n, int bins, unsigned *counts) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    atomicAdd(&counts[mix(static_cast<unsigned>(i)) % bins], 1u);
}

void run_histogram(int n, int bins, unsigned *counts) {
  unsigned *d;
  cudaMalloc(&d, bins * sizeof(unsigned));
  cudaMemset(d, 0, bins * sizeof(unsigned));
  histogram<<<(n + 127) / 128, 128>>>(n, bins, d);
  cudaMemcpy(counts, d, bins * sizeof(unsigned), cudaMemcpyDeviceToHost);
  cudaFree(d);
}
