// Rounding that floating-point reassociation changes: out = (x + 2^23) - 2^23
// rounds each x to an integer in IEEE order; a compiler allowed to
// reassociate folds the two constants and returns x unchanged. mneme diff's
// GPU test replays this kernel both ways and checks the ULP statistics.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#include "check.h"

__global__ void round_by_shift(const float *x, float *out, int n) {
  const float shift = 8388608.0f; // 2^23: x + shift has no fraction bits left
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += gridDim.x * blockDim.x)
    out[i] = (x[i] + shift) - shift;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 1 << 20;
  if (n <= 0) {
    std::fprintf(stderr, "usage: reassociation [N > 0]\n");
    return 2;
  }
  std::vector<float> x(n), out(n);
  for (int i = 0; i < n; ++i)
    x[i] = static_cast<float>(i % 1000) + static_cast<float>(i % 97) / 97.0f;
  float *dx, *dout;
  size_t bytes = n * sizeof(float);
  CHECK(cudaMalloc(&dx, bytes));
  CHECK(cudaMalloc(&dout, bytes));
  CHECK(cudaMemcpy(dx, x.data(), bytes, cudaMemcpyHostToDevice));
  round_by_shift<<<256, 256>>>(dx, dout, n);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(out.data(), dout, bytes, cudaMemcpyDeviceToHost));
  double sum = 0;
  for (int i = 0; i < n; ++i)
    sum += out[i];
  std::printf("reassociation n=%d checksum=%.1f\n", n, sum);
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dout));
  return 0;
}
