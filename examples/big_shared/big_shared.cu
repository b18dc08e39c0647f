// A kernel that needs more than 48 KiB of dynamic shared memory (opted in
// with cudaFuncSetAttribute): each block stages a 96 KiB tile and writes
// it back reversed.
//   usage: big_shared [tiles=256]
#include "check.h"

#include <vector>

constexpr int kTile = 96 * 1024 / sizeof(float); // elements per block

__global__ void tile_reverse(const float *in, float *out) {
  extern __shared__ float tile[];
  const float *src = in + long(blockIdx.x) * kTile;
  float *dst = out + long(blockIdx.x) * kTile;
  for (int i = threadIdx.x; i < kTile; i += blockDim.x)
    tile[i] = src[i];
  __syncthreads();
  for (int i = threadIdx.x; i < kTile; i += blockDim.x)
    dst[i] = tile[kTile - 1 - i];
}

int main(int argc, char **argv) {
  int tiles = argc > 1 ? std::atoi(argv[1]) : 256;
  if (tiles < 1 || tiles > 65535) {
    std::fprintf(stderr, "usage: big_shared [1 <= tiles <= 65535]\n");
    return 2;
  }
  long n = long(tiles) * kTile;
  std::vector<float> h(n);
  for (long i = 0; i < n; ++i)
    h[i] = float(i % 1000);
  float *d_in, *d_out;
  CHECK(cudaMalloc(&d_in, n * sizeof(float)));
  CHECK(cudaMalloc(&d_out, n * sizeof(float)));
  CHECK(cudaMemcpy(d_in, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const int smem = kTile * sizeof(float);
  CHECK(cudaFuncSetAttribute(tile_reverse, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  tile_reverse<<<tiles, 512, smem>>>(d_in, d_out);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(h.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("big_shared tiles=%d smem=%d checksum=%016llx\n", tiles, smem,
              (unsigned long long)fnv1a(h.data(), n * 4));
  CHECK(cudaFree(d_in));
  CHECK(cudaFree(d_out));
  return 0;
}
