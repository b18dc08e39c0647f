// A header shared by C++ and CUDA sources, written the way many projects
// write it: without nvcc, the CUDA qualifiers become nothing.
#pragma once
#if !defined(__NVCC__) && !defined(__HIPCC__)
#define __host__
#define __device__
#endif

// Integer hash, the same on host and device.
__host__ __device__ inline unsigned mix(unsigned x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  return x;
}

void run_mixed(int n, float scale, int rounds, long long *sum);
void run_histogram(int n, int bins, unsigned *counts);
long long run_scan(int n, int *last);
