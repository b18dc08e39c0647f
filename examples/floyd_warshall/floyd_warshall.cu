// All-pairs shortest paths by blocked Floyd-Warshall over a dense n x n
// distance matrix of ints.  For each of the n/32 rounds, phase 1 closes the
// 32 x 32 tile on the diagonal, phase 2 the tiles in its row and column
// through it, and phase 3 (the main kernel, one block per remaining tile)
// relaxes every other tile through its row and column tiles, all staged
// in shared memory.  Blocks of 32 x 8 threads each own four rows of a tile,
// so unrolling, register allocation and the n and round arguments (address
// arithmetic) decide the inner loops.  Min-plus over ints: every result is
// exact, whatever the order.
//   usage: floyd_warshall [n=6144]
#include "check.h"

#include <vector>

constexpr int kTile = 32;      // tile edge, and blockDim.x
constexpr int kRows = 8;       // blockDim.y: each thread owns kTile / kRows rows
constexpr int kInf = 1 << 29;  // no path; kInf + kInf still fits an int

// d[row][col], or kInf outside the matrix (the last tiles are partial).
__device__ inline int load(const int *d, int n, int row, int col) {
  return row < n && col < n ? d[long(row) * n + col] : kInf;
}

__device__ inline void store(int *d, int n, int row, int col, int v) {
  if (row < n && col < n)
    d[long(row) * n + col] = v;
}

// Phase 1: the diagonal tile (round, round) through itself.  An entry of
// row k or column k never improves at step k (the diagonal is >= 0), so
// only entries no other thread reads at that step are written.
__global__ void fw_diagonal(int *d, int n, int round) {
  __shared__ int t[kTile][kTile];
  const int base = round * kTile, tx = threadIdx.x;
  for (int r = threadIdx.y; r < kTile; r += kRows)
    t[r][tx] = load(d, n, base + r, base + tx);
  __syncthreads();
  for (int k = 0; k < kTile; ++k) {
    for (int r = threadIdx.y; r < kTile; r += kRows) {
      int via = t[r][k] + t[k][tx];
      if (via < t[r][tx])
        t[r][tx] = via;
    }
    __syncthreads();
  }
  for (int r = threadIdx.y; r < kTile; r += kRows)
    store(d, n, base + r, base + tx, t[r][tx]);
}

// Phase 2: the tiles of the round's block row (blockIdx.y == 0) and block
// column (blockIdx.y == 1) through the closed diagonal tile.
__global__ void fw_panels(int *d, int n, int round) {
  const int other = blockIdx.x;
  if (other == round)
    return;
  __shared__ int pivot[kTile][kTile], own[kTile][kTile];
  const bool in_row = blockIdx.y == 0;
  const int base = round * kTile, tx = threadIdx.x;
  const int row0 = in_row ? base : other * kTile, col0 = in_row ? other * kTile : base;
  for (int r = threadIdx.y; r < kTile; r += kRows) {
    pivot[r][tx] = load(d, n, base + r, base + tx);
    own[r][tx] = load(d, n, row0 + r, col0 + tx);
  }
  __syncthreads();
  for (int k = 0; k < kTile; ++k) {
    for (int r = threadIdx.y; r < kTile; r += kRows) {
      int via = in_row ? pivot[r][k] + own[k][tx] : own[r][k] + pivot[k][tx];
      if (via < own[r][tx])
        own[r][tx] = via;
    }
    __syncthreads();
  }
  for (int r = threadIdx.y; r < kTile; r += kRows)
    store(d, n, row0 + r, col0 + tx, own[r][tx]);
}

// Phase 3: every tile (bi, bj) off the round's row and column, through the
// finished tiles (bi, round) and (round, bj); the tile itself stays in
// registers, kTile / kRows entries per thread.
__global__ void fw_remaining(int *d, int n, int round) {
  const int bi = blockIdx.y, bj = blockIdx.x;
  if (bi == round || bj == round)
    return;
  __shared__ int left[kTile][kTile], up[kTile][kTile];
  const int base = round * kTile, tx = threadIdx.x, ty = threadIdx.y;
  const int row0 = bi * kTile, col0 = bj * kTile;
  int v[kTile / kRows];
  for (int q = 0; q < kTile / kRows; ++q) {
    int r = ty + q * kRows;
    left[r][tx] = load(d, n, row0 + r, base + tx);
    up[r][tx] = load(d, n, base + r, col0 + tx);
    v[q] = load(d, n, row0 + r, col0 + tx);
  }
  __syncthreads();
  for (int k = 0; k < kTile; ++k) {
    int b = up[k][tx];
    for (int q = 0; q < kTile / kRows; ++q)
      v[q] = min(v[q], left[ty + q * kRows][k] + b);
  }
  for (int q = 0; q < kTile / kRows; ++q)
    store(d, n, row0 + ty + q * kRows, col0 + tx, v[q]);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 6144;
  if (n < 2 || n > 16384) {
    std::fprintf(stderr, "usage: floyd_warshall [2 <= n <= 16384]\n");
    return 2;
  }
  // A random directed graph: each edge present with probability 1/32, its
  // weight in [1, 1000].
  const long cells = long(n) * n;
  std::vector<int> dist(cells);
  uint64_t state = 31337;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      uint32_t h = uint32_t(state >> 32);
      dist[long(i) * n + j] = i == j ? 0 : h % 32 == 0 ? 1 + int((h >> 5) % 1000) : kInf;
    }
  int *d_dist;
  CHECK(cudaMalloc(&d_dist, cells * sizeof(int)));
  CHECK(cudaMemcpy(d_dist, dist.data(), cells * sizeof(int), cudaMemcpyHostToDevice));
  const int tiles = (n + kTile - 1) / kTile;
  const dim3 block(kTile, kRows);
  for (int round = 0; round < tiles; ++round) {
    fw_diagonal<<<1, block>>>(d_dist, n, round);
    fw_panels<<<dim3(tiles, 2), block>>>(d_dist, n, round);
    fw_remaining<<<dim3(tiles, tiles), block>>>(d_dist, n, round);
  }
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(dist.data(), d_dist, cells * sizeof(int), cudaMemcpyDeviceToHost));
  long reachable = 0;
  double total = 0.0;
  for (long c = 0; c < cells; ++c)
    if (dist[c] < kInf) {
      ++reachable;
      total += dist[c];
    }
  std::printf("floyd_warshall n=%d rounds=%d reachable=%ld mean_distance=%.6f "
              "checksum=%016llx\n",
              n, tiles, reachable, total / reachable,
              (unsigned long long)fnv1a(dist.data(), cells * sizeof(int)));
  CHECK(cudaFree(d_dist));
  return 0;
}
