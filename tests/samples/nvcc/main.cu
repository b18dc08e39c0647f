// The second translation unit: one kernel, and main.
#include <algorithm>
#include <cstdlib>
#include <vector>

#include "common.cuh"

// Legacy code nvcc accepts: `register` (gone in C++17) and std::min in device
// code (a constexpr host function; nvcc wants --expt-relaxed-constexpr).
__device__ float clamp_unit(float v) {
  register float r = std::min(v, 1.0f);
  return r;
}

__global__ void normalize(float *v, float scale, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = clamp_unit(sqrtf(v[i]) / scale);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 4096;
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = float(i % 97);
  float *x = nullptr, *y = nullptr;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&y, n * sizeof(float)));
  CHECK(cudaMemcpy(x, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(y, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  if (run_saxpy(2.0f, x, y, n)) return 1;
  normalize<<<(n + 255) / 256, 256>>>(y, 32.0f, n);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(host.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
  double sum = 0;
  for (float v : host) sum += v;
  std::printf("nvcc sample n=%d sum=%.6f\n", n, sum);
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  return 0;
}
