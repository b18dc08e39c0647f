#include <cstdio>

// Each parent thread launches a child grid over its own slice.
__global__ void child(int *data, int offset, int count) {
  int i = threadIdx.x;
  if (i < count)
    data[offset + i] += offset / count + 1;
}

__global__ void parent(int *data, int slices, int count) {
  int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s < slices)
    child<<<1, count>>>(data, s * count, count);
}

int main() {
  const int slices = 64, count = 32, n = slices * count;
  int *d;
  cudaMalloc(&d, n * sizeof(int));
  cudaMemset(d, 0, n * sizeof(int));
  parent<<<2, 32>>>(d, slices, count);
  int h[n];
  cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
  long long sum = 0;
  for (int v : h)
    sum += v;
  cudaError_t err = cudaGetLastError();
  std::printf("dp slices=%d sum=%lld %s\n", slices, sum, cudaGetErrorString(err));
  return 0;
}
