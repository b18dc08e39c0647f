// One application built from two translation units (this file and
// physics.cu) and a static library (mathlib): kernels from all three are
// recorded.  Values stay small integers and halves, so results are exact.
//   usage: multi_tu [n=1048576]
#include "check.h"
#include "mathlib.h"

#include <vector>

void physics_step(float *pos, const float *vel, float dt, int n);

__global__ void init(float *pos, float *vel, int *index, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    pos[i] = float(i % 100);
    vel[i] = float(i % 7) - 3.0f;
    index[i] = i % 5;
  }
}

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 1 << 20;
  if (n < 1) {
    std::fprintf(stderr, "usage: multi_tu [n >= 1]\n");
    return 2;
  }
  float *pos, *vel, *out;
  int *index;
  CHECK(cudaMalloc(&pos, n * sizeof(float)));
  CHECK(cudaMalloc(&vel, n * sizeof(float)));
  CHECK(cudaMalloc(&out, n * sizeof(float)));
  CHECK(cudaMalloc(&index, n * sizeof(int)));
  init<<<(n + 255) / 256, 256>>>(pos, vel, index, n);
  for (int step = 0; step < 3; ++step)
    physics_step(pos, vel, 0.5f, n);
  mathlib_affine(out, pos, 2.0f, 1.0f, n);
  mathlib_lookup(out, index, n);
  CHECK(cudaGetLastError());
  std::vector<float> h(n);
  CHECK(cudaMemcpy(h.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("multi_tu n=%d checksum=%016llx\n", n, (unsigned long long)fnv1a(h.data(), n * 4));
  for (void *p : {(void *)pos, (void *)vel, (void *)out, (void *)index})
    CHECK(cudaFree(p));
  return 0;
}
