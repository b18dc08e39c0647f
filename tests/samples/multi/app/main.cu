#include "../common.h"

#include <cstdint>
#include <vector>

__global__ void fill(float *f, int *k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    f[i] = static_cast<float>(i % 64);
    k[i] = i % 1000;
  }
}

namespace checks {
__global__ void histogram(const int *k, unsigned *bins, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    atomicAdd(&bins[k[i] % 16], 1u);
}
} // namespace checks

template <typename T> uint64_t fnv1a(const std::vector<T> &v) {
  uint64_t h = 0xcbf29ce484222325ull;
  const unsigned char *p = reinterpret_cast<const unsigned char *>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(T); ++i)
    h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 100000;
  float *f, *g;
  int *k;
  unsigned *bins;
  CHECK(cudaMalloc(&f, n * sizeof(float)));
  CHECK(cudaMalloc(&g, n * sizeof(float)));
  CHECK(cudaMalloc(&k, n * sizeof(int)));
  CHECK(cudaMalloc(&bins, 16 * sizeof(unsigned)));
  CHECK(cudaMemset(bins, 0, 16 * sizeof(unsigned)));

  fill<<<(n + 255) / 256, 256>>>(f, k, n);
  CHECK(cudaGetLastError());
  launch_scale_float(f, n, 2.0f);
  launch_scale_int(k, n, 3);
  launch_stencil(f, g, n);
  checks::histogram<<<(n + 255) / 256, 256>>>(k, bins, n);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  std::vector<float> hf(n), hg(n);
  std::vector<int> hk(n);
  std::vector<unsigned> hb(16);
  CHECK(cudaMemcpy(hf.data(), f, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hg.data(), g, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hk.data(), k, n * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hb.data(), bins, 16 * sizeof(unsigned), cudaMemcpyDeviceToHost));
  std::printf("n=%d\n", n);
  std::printf("scaled float  %016llx first=%g last=%g\n",
              (unsigned long long)fnv1a(hf), hf[0], hf[n - 1]);
  std::printf("scaled int    %016llx first=%d last=%d\n",
              (unsigned long long)fnv1a(hk), hk[0], hk[n - 1]);
  std::printf("stencil       %016llx mid=%g\n", (unsigned long long)fnv1a(hg), hg[n / 2]);
  std::printf("histogram     %016llx bin0=%u\n", (unsigned long long)fnv1a(hb), hb[0]);
  return 0;
}
