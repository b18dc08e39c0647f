// A kernel that misbehaves on purpose under some launch geometries, so that
// the tuner's failure handling can be tested against real faults:
//   blockDim.x == 64   spins forever (a hang)
//   blockDim.x == 96   writes 4 GiB past its buffer (an illegal address)
// At the recorded 128-thread blocks it fills out[i] = 2 i.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check.h"

__global__ void sensitive(float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (blockDim.x == 64) {
    // out[0] is never negative: the loop does not end. volatile keeps the
    // load inside the loop.
    volatile float *flag = out;
    while (*flag >= 0.0f) {
    }
  }
  if (blockDim.x == 96)
    out[i + (1 << 30)] = 1.0f;
  if (i < n)
    out[i] = 2.0f * static_cast<float>(i);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 1 << 20;
  if (n <= 0) {
    std::fprintf(stderr, "usage: fault_injection [N > 0]\n");
    return 2;
  }
  float *out;
  CHECK(cudaMalloc(&out, n * sizeof(float)));
  CHECK(cudaMemset(out, 0, n * sizeof(float)));
  sensitive<<<(n + 127) / 128, 128>>>(out, n);
  CHECK(cudaGetLastError());
  std::vector<float> host(n);
  CHECK(cudaMemcpy(host.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("fault_injection: checksum %016llx\n",
              static_cast<unsigned long long>(fnv1a(host.data(), n * sizeof(float))));
  CHECK(cudaFree(out));
  return 0;
}
