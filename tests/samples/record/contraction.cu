// Two products added, under clang's -ffp-contract=fast: the back end fuses
// the one with fewer uses into an fma. With `keep` 0 the build sees p used
// twice (the sum and, in another block, the store) and fuses q; a replay
// that specialises `keep` to its recorded 0 deletes that store, leaves a tie
// and fuses p: other roundings from a configuration the rules cannot judge
// in advance (mneme_cc.replay.judging.contraction_probe).
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

static void check(cudaError_t e) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "contraction: %s\n", cudaGetErrorString(e));
    std::exit(1);
  }
}

__global__ void pair(const float *x, const float *y, const float *z, float *out, float *extra,
                     int keep, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float p = x[i] * y[i], q = y[i] * z[i];
  out[i] = p + q;
  if (keep)
    extra[i] = p;
}

int main() {
  const int n = 1 << 16;
  std::vector<float> h(3 * n);
  for (int i = 0; i < 3 * n; ++i)
    h[i] = 1.0f / float(i % 997 + 3) - 0.25f; // inexact, both signs
  float *d;
  check(cudaMalloc(&d, 5 * n * sizeof(float)));
  check(cudaMemcpy(d, h.data(), 3 * n * sizeof(float), cudaMemcpyHostToDevice));
  check(cudaMemset(d + 3 * n, 0, 2 * n * sizeof(float)));
  pair<<<n / 256, 256>>>(d, d + n, d + 2 * n, d + 3 * n, d + 4 * n, 0, n);
  check(cudaGetLastError());
  check(cudaMemcpy(h.data(), d + 3 * n, n * sizeof(float), cudaMemcpyDeviceToHost));
  double sum = 0;
  for (int i = 0; i < n; ++i)
    sum += h[i];
  std::printf("contraction sum=%.9g\n", sum);
  check(cudaFree(d));
  return 0;
}
