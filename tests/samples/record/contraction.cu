// Two products added, under clang's -ffp-contract=fast: the back end fuses
// the one with fewer uses into an fma. With `keep` 0 the build sees p used
// twice (the sum and, in another block, the store) and fuses q; a replay
// that specialises `keep` to its recorded 0 deletes that store, leaves a tie
// and fuses p: other roundings from a configuration the rules cannot judge
// in advance (mneme_cc.replay.judging.contraction_probe).
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

#define CHECK(call)                                                            \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      return 1;                                                                \
    }                                                                          \
  } while (0)

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
  CHECK(cudaMalloc(&d, 5 * n * sizeof(float)));
  CHECK(cudaMemcpy(d, h.data(), 3 * n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(d + 3 * n, 0, 2 * n * sizeof(float)));
  pair<<<n / 256, 256>>>(d, d + n, d + 2 * n, d + 3 * n, d + 4 * n, 0, n);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(h.data(), d + 3 * n, n * sizeof(float), cudaMemcpyDeviceToHost));
  double sum = 0;
  for (int i = 0; i < n; ++i)
    sum += h[i];
  std::printf("contraction sum=%.9g\n", sum);
  CHECK(cudaFree(d));
  return 0;
}
