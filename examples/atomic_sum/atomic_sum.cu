// A floating-point atomic reduction: values are added into bins with
// atomicAdd.  The values are small integers, so every order of the atomics
// gives the same, exact sums.
//   usage: atomic_sum [n=4194304]
#include "check.h"

#include <vector>

constexpr int kBins = 64;

__global__ void binned_sum(const float *x, const int *bin, float *sums, double *total, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    atomicAdd(&sums[bin[i]], x[i]);
    atomicAdd(total, double(x[i]));
  }
}

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 1 << 22;
  if (n < 1 || n > (1 << 26)) {
    std::fprintf(stderr, "usage: atomic_sum [1 <= n <= 2^26]\n");
    return 2;
  }
  std::vector<float> x(n);
  std::vector<int> bin(n);
  for (int i = 0; i < n; ++i) {
    x[i] = float(i % 8);
    bin[i] = int((long(i) * 13) % kBins);
  }
  float *d_x, *d_sums;
  int *d_bin;
  double *d_total;
  CHECK(cudaMalloc(&d_x, n * sizeof(float)));
  CHECK(cudaMalloc(&d_bin, n * sizeof(int)));
  CHECK(cudaMalloc(&d_sums, kBins * sizeof(float)));
  CHECK(cudaMalloc(&d_total, sizeof(double)));
  CHECK(cudaMemcpy(d_x, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_bin, bin.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(d_sums, 0, kBins * sizeof(float)));
  CHECK(cudaMemset(d_total, 0, sizeof(double)));
  binned_sum<<<512, 256>>>(d_x, d_bin, d_sums, d_total, n);
  CHECK(cudaGetLastError());
  std::vector<float> sums(kBins);
  double total;
  CHECK(cudaMemcpy(sums.data(), d_sums, kBins * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&total, d_total, sizeof total, cudaMemcpyDeviceToHost));
  std::printf("atomic_sum n=%d total=%.1f bins=%016llx\n", n, total,
              (unsigned long long)fnv1a(sums.data(), kBins * 4));
  CHECK(cudaFree(d_x));
  CHECK(cudaFree(d_bin));
  CHECK(cudaFree(d_sums));
  CHECK(cudaFree(d_total));
  return 0;
}
