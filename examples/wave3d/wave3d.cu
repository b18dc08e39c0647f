// Seismic modelling as reverse-time-migration codes do it: the acoustic wave
// equation, 8th order in space (a radius-4 star stencil over a 3D grid of
// floats) and 2nd order in time, on a velocity model with a layer in it. A
// 2D grid of threads covers x and y and each thread marches along z; the
// new field overwrites the previous one in place,
//     p = 2 u - p + (v dt / h)^2 lap(u),
// and a Ricker wavelet is injected at a point after each step. Coefficients
// and fields are inexact floats, so the result depends on which multiplies
// and adds the compiler fuses: built with clang's -ffp-contract=fast, the
// pattern whose tuning studies must tell a fusion change from a miscompile.
//   usage: wave3d [N=96] [steps=8]
#include "check.h"

#include <cmath>
#include <utility>
#include <vector>

constexpr int kRadius = 4;
// Central differences of the second derivative, 8th order.
__constant__ float c_coef[kRadius + 1];

__global__ void wave_step(const float *__restrict__ u, float *__restrict__ p,
                          const float *__restrict__ vdt2, int nx, int ny, int nz) {
  int x = blockIdx.x * blockDim.x + threadIdx.x + kRadius;
  int y = blockIdx.y * blockDim.y + threadIdx.y + kRadius;
  if (x >= nx - kRadius || y >= ny - kRadius)
    return;
  long sy = nx, sz = long(nx) * ny;
  for (int z = kRadius; z < nz - kRadius; ++z) {
    long i = z * sz + y * sy + x;
    float lap = 3.0f * c_coef[0] * u[i];
    for (int k = 1; k <= kRadius; ++k)
      lap += c_coef[k] * (u[i + k] + u[i - k] + u[i + k * sy] + u[i - k * sy] + u[i + k * sz] +
                          u[i - k * sz]);
    p[i] = 2.0f * u[i] - p[i] + vdt2[i] * lap;
  }
}

__global__ void inject(float *u, long at, float amplitude) { u[at] += amplitude; }

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 96;
  int steps = argc > 2 ? std::atoi(argv[2]) : 8;
  if (n < 2 * kRadius + 8 || n > 512 || (n - 2 * kRadius) % 8 || steps < 1) {
    std::fprintf(stderr, "usage: wave3d [16 <= N <= 512, N - 8 a multiple of 8] [steps >= 1]\n");
    return 2;
  }
  const float coef[kRadius + 1] = {-2.84722222f, 1.6f, -0.2f, 0.0253968254f, -0.00178571429f};
  CHECK(cudaMemcpyToSymbol(c_coef, coef, sizeof coef));
  long cells = long(n) * n * n;
  std::vector<float> u(cells), vdt2(cells);
  const float h = 10.0f, dt = 0.001f;
  for (long i = 0; i < cells; ++i) {
    int x = i % n, y = (i / n) % n, z = i / (long(n) * n);
    float v = z < n / 2 ? 1500.0f : 2200.0f + 3.0f * float(x + y) / float(n); // a layer
    vdt2[i] = (v * dt / h) * (v * dt / h);
    float r2 = float((x - n / 2) * (x - n / 2) + (y - n / 2) * (y - n / 2) +
                     (z - n / 3) * (z - n / 3));
    u[i] = std::exp(-r2 / 18.0f) * 0.1f;
  }
  float *d_u, *d_p, *d_v;
  CHECK(cudaMalloc(&d_u, cells * sizeof(float)));
  CHECK(cudaMalloc(&d_p, cells * sizeof(float)));
  CHECK(cudaMalloc(&d_v, cells * sizeof(float)));
  CHECK(cudaMemcpy(d_u, u.data(), cells * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_p, u.data(), cells * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_v, vdt2.data(), cells * sizeof(float), cudaMemcpyHostToDevice));
  dim3 block(32, 8), grid((n - 2 * kRadius + 31) / 32, (n - 2 * kRadius) / 8);
  long source = (long(n) / 3 * n + n / 2) * n + n / 2;
  for (int t = 0; t < steps; ++t) {
    wave_step<<<grid, block>>>(d_u, d_p, d_v, n, n, n);
    std::swap(d_u, d_p);
    float s = 3.14159265f * 25.0f * (float(t) * dt - 0.004f); // Ricker, 25 Hz
    inject<<<1, 1>>>(d_u, source, (1.0f - 2.0f * s * s) * std::exp(-s * s));
  }
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(u.data(), d_u, cells * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(d_u));
  CHECK(cudaFree(d_p));
  CHECK(cudaFree(d_v));
  std::printf("wave3d N=%d steps=%d field=%016llx\n", n, steps,
              (unsigned long long)fnv1a(u.data(), cells * sizeof(float)));
  return 0;
}
