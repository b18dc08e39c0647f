// What every example shares: a CUDA error check and an FNV-1a checksum of
// the bytes it computed (so "same output" means the same bits).
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CHECK(call)                                                            \
  do {                                                                         \
    cudaError_t err_ = (call);                                                 \
    if (err_ != cudaSuccess) {                                                 \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,                  \
                   cudaGetErrorString(err_));                                  \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

inline uint64_t fnv1a(const void *data, size_t bytes) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < bytes; ++i)
    h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}
