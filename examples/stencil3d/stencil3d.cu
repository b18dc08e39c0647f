// A 3D 7-point stencil, templated on the element type, reading its weights
// from __constant__ memory and a scale from a __device__ global; a few
// ping-pong time steps in float and in double.  Inputs are small integers
// and the weights powers of two, so every result is exact.
//   usage: stencil3d [N=64]
#include "check.h"

#include <vector>

__constant__ float c_weights[7]; // centre, -x, +x, -y, +y, -z, +z
__device__ float g_scale;

template <typename T, int Radius>
__global__ void stencil3d(const T *in, T *out, int nx, int ny, int nz) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  int z = blockIdx.z * blockDim.z + threadIdx.z;
  if (x >= nx || y >= ny || z >= nz)
    return;
  long i = (long(z) * ny + y) * nx + x;
  if (x < Radius || y < Radius || z < Radius || x >= nx - Radius || y >= ny - Radius ||
      z >= nz - Radius) {
    out[i] = in[i];
    return;
  }
  long sx = 1, sy = nx, sz = long(nx) * ny;
  T sum = T(c_weights[0]) * in[i] + T(c_weights[1]) * in[i - sx] + T(c_weights[2]) * in[i + sx] +
          T(c_weights[3]) * in[i - sy] + T(c_weights[4]) * in[i + sy] +
          T(c_weights[5]) * in[i - sz] + T(c_weights[6]) * in[i + sz];
  out[i] = sum * T(g_scale);
}

template <typename T> uint64_t run(int N, int steps) {
  long n = long(N) * N * N;
  std::vector<T> h(n);
  for (long i = 0; i < n; ++i)
    h[i] = T((i * 7) % 16);
  T *a, *b;
  CHECK(cudaMalloc(&a, n * sizeof(T)));
  CHECK(cudaMalloc(&b, n * sizeof(T)));
  CHECK(cudaMemcpy(a, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  dim3 block(8, 8, 4), grid((N + 7) / 8, (N + 7) / 8, (N + 3) / 4);
  for (int s = 0; s < steps; ++s) {
    stencil3d<T, 1><<<grid, block>>>(a, b, N, N, N);
    std::swap(a, b);
  }
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(h.data(), a, n * sizeof(T), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  return fnv1a(h.data(), n * sizeof(T));
}

int main(int argc, char **argv) {
  int N = argc > 1 ? std::atoi(argv[1]) : 64;
  if (N < 3 || N > 512) {
    std::fprintf(stderr, "usage: stencil3d [3 <= N <= 512]\n");
    return 2;
  }
  const float weights[7] = {0.5f, 0.125f, 0.125f, 0.125f, 0.125f, 0.0625f, 0.0625f};
  const float scale = 0.5f;
  CHECK(cudaMemcpyToSymbol(c_weights, weights, sizeof weights));
  CHECK(cudaMemcpyToSymbol(g_scale, &scale, sizeof scale));
  uint64_t f = run<float>(N, 3);
  uint64_t d = run<double>(N, 2);
  std::printf("stencil3d N=%d float=%016llx double=%016llx\n", N, (unsigned long long)f,
              (unsigned long long)d);
  return 0;
}
