// Separable compilation sample: main.cu runs integrate.cu's kernel, which
// calls into libphysics.a, and reads the library's bounce counter.  Every
// value is exact in float, so every compiler prints the same numbers.
#include "particles.cuh"

#include <cstdio>
#include <vector>

__global__ void init(float *position, float *velocity, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    position[i] = static_cast<float>(i % 64);
    velocity[i] = static_cast<float>(i % 7) - 3.0f;
  }
}

#define CHECK(call)                                                          \
  do {                                                                       \
    cudaError_t err = (call);                                                \
    if (err != cudaSuccess) {                                                \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(err));     \
      return 1;                                                              \
    }                                                                        \
  } while (0)

int main() {
  const int n = 4096, steps = 6, threads = 128;
  const int blocks = (n + threads - 1) / threads;
  float *position, *velocity;
  CHECK(cudaMalloc(&position, n * sizeof(float)));
  CHECK(cudaMalloc(&velocity, n * sizeof(float)));
  init<<<blocks, threads>>>(position, velocity, n);
  for (int s = 0; s < steps; ++s)
    launch_integrate(position, velocity, n, 0.25f, blocks, threads);
  CHECK(cudaDeviceSynchronize());
  std::vector<float> x(n), v(n);
  int bounces = 0;
  CHECK(cudaMemcpy(x.data(), position, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(v.data(), velocity, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpyFromSymbol(&bounces, g_bounces, sizeof(int)));
  double sx = 0, sv = 0;
  for (int i = 0; i < n; ++i) {
    sx += x[i];
    sv += v[i];
  }
  std::printf("rdc n=%d steps=%d position=%.6f velocity=%.6f bounces=%d\n", n, steps, sx, sv,
              bounces);
  CHECK(cudaFree(position));
  CHECK(cudaFree(velocity));
  return 0;
}
