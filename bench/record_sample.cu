// The record-overhead sample: many recorded instances in a short run, and
// many launches that are not recorded.
//   phase 1: 16 kernels x 6 problem sizes (1 to 32 MiB): the recorder keeps
//            4 distinct instances of each (64 instances), the other 32
//            launches are over the instance limit;
//   phase 2: `launches` launches of one small kernel (default 100000): after
//            its first 4 instances every launch is one the recorder passes on.
// Prints a checksum of the results, the same natively and recorded.
//   usage: record_sample [launches=100000]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(call)                                                                  \
  do {                                                                               \
    cudaError_t e = (call);                                                          \
    if (e != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e));                \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

template <int K> __global__ void axpb(const float *in, float *out, long n) {
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x)
    out[i] = in[i] * float(K + 1) + float(K);
}

__global__ void bump(unsigned *counter, unsigned step) { atomicAdd(counter, step); }

template <int K> void phase1(const float *in, float *out) {
  for (int s = 0; s < 6; ++s) {
    long n = (1L << 18) << (s % 6); // 1 MiB .. 32 MiB of floats
    axpb<K><<<264, 256>>>(in, out, n);
  }
  if constexpr (K > 0)
    phase1<K - 1>(in, out);
}

int main(int argc, char **argv) {
  long launches = argc > 1 ? std::atol(argv[1]) : 100000;
  if (launches < 1) {
    std::fprintf(stderr, "usage: record_sample [launches >= 1]\n");
    return 2;
  }
  const long n = 1L << 23;
  float *in, *out;
  unsigned *counter;
  CHECK(cudaMalloc(&in, n * sizeof(float)));
  CHECK(cudaMalloc(&out, n * sizeof(float)));
  CHECK(cudaMalloc(&counter, sizeof(unsigned)));
  CHECK(cudaMemset(in, 0, n * sizeof(float)));
  CHECK(cudaMemset(counter, 0, sizeof(unsigned)));
  phase1<15>(in, out);
  for (long i = 0; i < launches; ++i)
    bump<<<1, 32>>>(counter, 1);
  CHECK(cudaGetLastError());
  float tail;
  unsigned total;
  CHECK(cudaMemcpy(&tail, out + n - 1, sizeof tail, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&total, counter, sizeof total, cudaMemcpyDeviceToHost));
  std::printf("record_sample launches=%ld counter=%u tail=%g\n", launches, total, tail);
  return 0;
}
