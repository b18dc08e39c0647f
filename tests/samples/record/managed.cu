// A kernel launched on managed memory: the recorder must say it cannot be
// replayed, and the program must compute the same as without it.
#include <cstdio>

#include <cuda_runtime.h>

__global__ void twice(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] *= 2.0f;
}

int main() {
  const int n = 4096;
  float *x;
  if (cudaMallocManaged(&x, n * sizeof(float)) != cudaSuccess)
    return 1;
  for (int i = 0; i < n; ++i)
    x[i] = float(i);
  twice<<<n / 256, 256>>>(x, n);
  cudaDeviceSynchronize();
  double sum = 0;
  for (int i = 0; i < n; ++i)
    sum += x[i];
  std::printf("managed sum=%.1f\n", sum);
  cudaFree(x);
  return 0;
}
