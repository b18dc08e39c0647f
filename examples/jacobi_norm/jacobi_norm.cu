// Jacobi relaxation of a 2-D Poisson problem that accumulates the squared
// norm of each sweep's update with one float atomicAdd per block.  The
// order of those atomics changes from run to run, so the norm's last bits
// do too (the grid itself is deterministic): replay must recognise the
// norm as nondeterministic rather than call it a miscompile.
//   usage: jacobi_norm [n=2048] [sweeps=10]
#include "check.h"

#include <cmath>
#include <vector>

constexpr int kTile = 16;

__global__ void relax(const float *u, const float *f, float *out, float *norm, int n, float h2) {
  __shared__ float partial[kTile * kTile];
  int x = blockIdx.x * kTile + threadIdx.x;
  int y = blockIdx.y * kTile + threadIdx.y;
  int t = threadIdx.y * kTile + threadIdx.x;
  float d = 0.0f;
  if (x < n && y < n) {
    int i = y * n + x;
    float v = u[i];
    if (x > 0 && y > 0 && x < n - 1 && y < n - 1)
      v = 0.25f * (u[i - 1] + u[i + 1] + u[i - n] + u[i + n] - h2 * f[i]);
    out[i] = v;
    d = v - u[i];
  }
  partial[t] = d * d;
  __syncthreads();
  for (int s = kTile * kTile / 2; s > 0; s /= 2) {
    if (t < s)
      partial[t] += partial[t + s];
    __syncthreads();
  }
  if (t == 0)
    atomicAdd(norm, partial[0]);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 2048;
  int sweeps = argc > 2 ? std::atoi(argv[2]) : 10;
  if (n < 16 || n > 16384 || sweeps < 1 || sweeps > 10000) {
    std::fprintf(stderr, "usage: jacobi_norm [16 <= n <= 16384] [1 <= sweeps <= 10000]\n");
    return 2;
  }
  size_t cells = size_t(n) * n;
  std::vector<float> f(cells), u(cells, 0.0f);
  for (size_t i = 0; i < cells; ++i)
    f[i] = std::sin(0.001f * float(i % 7919)) * 0.5f;
  float *d_u, *d_v, *d_f, *d_norm;
  CHECK(cudaMalloc(&d_u, cells * sizeof(float)));
  CHECK(cudaMalloc(&d_v, cells * sizeof(float)));
  CHECK(cudaMalloc(&d_f, cells * sizeof(float)));
  CHECK(cudaMalloc(&d_norm, sizeof(float)));
  CHECK(cudaMemcpy(d_u, u.data(), cells * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_f, f.data(), cells * sizeof(float), cudaMemcpyHostToDevice));
  dim3 block(kTile, kTile), grid((n + kTile - 1) / kTile, (n + kTile - 1) / kTile);
  float h2 = 1.0f / float(n * n), norm = 0.0f;
  for (int s = 0; s < sweeps; ++s) {
    CHECK(cudaMemset(d_norm, 0, sizeof(float)));
    relax<<<grid, block>>>(d_u, d_f, d_v, d_norm, n, h2);
    CHECK(cudaGetLastError());
    std::swap(d_u, d_v);
  }
  CHECK(cudaMemcpy(&norm, d_norm, sizeof norm, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(u.data(), d_u, cells * sizeof(float), cudaMemcpyDeviceToHost));
  // The grid is exact; the norm is printed to the digits every run agrees on.
  std::printf("jacobi_norm n=%d sweeps=%d norm=%.3e grid=%016llx\n", n, sweeps, std::sqrt(norm),
              (unsigned long long)fnv1a(u.data(), cells * sizeof(float)));
  CHECK(cudaFree(d_u));
  CHECK(cudaFree(d_v));
  CHECK(cudaFree(d_f));
  CHECK(cudaFree(d_norm));
  return 0;
}
