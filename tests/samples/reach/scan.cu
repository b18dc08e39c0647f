#include "portable.h"

// One block's inclusive prefix sum in shared memory.
__global__ void block_scan(int n, const int *in, int *out) {
  __shared__ int s[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? in[i] : 0;
  __syncthreads();
  for (int step = 1; step < blockDim.x; step *= 2) {
    int v = threadIdx.x >= step ? s[threadIdx.x - step] : 0;
    __syncthreads();
    s[threadIdx.x] += v;
    __syncthreads();
  }
  if (i < n)
    out[i] = s[threadIdx.x];
}

long long run_scan(int n, int *last) {
  int *in, *out;
  cudaMalloc(&in, n * sizeof(int));
  cudaMalloc(&out, n * sizeof(int));
  int *h = new int[n];
  for (int i = 0; i < n; ++i)
    h[i] = static_cast<int>(mix(static_cast<unsigned>(i)) % 10);
  cudaMemcpy(in, h, n * sizeof(int), cudaMemcpyHostToDevice);
  block_scan<<<(n + 255) / 256, 256>>>(n, in, out);
  cudaMemcpy(h, out, n * sizeof(int), cudaMemcpyDeviceToHost);
  long long sum = 0;
  for (int i = 0; i < n; ++i)
    sum += h[i];
  *last = h[n - 1];
  delete[] h;
  cudaFree(in);
  cudaFree(out);
  return sum;
}
