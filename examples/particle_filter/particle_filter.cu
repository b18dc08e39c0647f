// A bootstrap particle filter tracking a target that moves in the plane,
// seen through noisy range measurements to a set of beacons.  Every step
// each particle moves with a constant-velocity model plus noise drawn from a
// counter-based hash, is weighed through a robust likelihood (a Gaussian
// plus an outlier floor: sqrtf, expf, logf per beacon), the weights are
// prefix-summed in double by a deterministic three-kernel scan, and
// systematic resampling picks the new particle set by binary search in the
// cumulative weights.  A compute-bound kernel (weighing) feeds a
// latency-bound one (resampling), with a scan in between; the beacon count
// is an argument that bounds the weighing loop.  No atomics, and every sum
// runs in a fixed order: the same bits on every run.
//   usage: particle_filter [particles=4194304] [beacons=64] [steps=4]
#include "check.h"

#include <cmath>
#include <vector>

constexpr int kThreads = 256;
constexpr int kItems = 8;                     // consecutive weights per scanning thread
constexpr int kScanTile = kThreads * kItems;  // weights per scanning block
constexpr int kSumsThreads = 1024;            // the one block that scans the tile sums
constexpr float kOutlier = 0.05f;             // likelihood floor of a wild measurement

__device__ inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// About standard normal: the sum of four 16-bit uniforms, centred and
// scaled to unit variance (Irwin-Hall).
__device__ inline float gauss(uint64_t h) {
  float sum = float(h & 0xffff) + float((h >> 16) & 0xffff) + float((h >> 32) & 0xffff) +
              float(h >> 48);
  return (sum * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
}

// Moves particle i one step and weighs it against the beacons' measured
// ranges (beacon b: position .x, .y, measured range .z).  The weight is
// relative to a perfect match on every beacon, so it is at most 1.
__global__ void predict_weigh(int n, float *x, float *y, float *weight, const float4 *beacons,
                              int n_beacons, float vx, float vy, float motion_sigma,
                              float range_sigma, int step) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  uint64_t h = mix64((uint64_t(step) << 32) ^ uint64_t(i));
  float px = x[i] + vx + motion_sigma * gauss(h);
  float py = y[i] + vy + motion_sigma * gauss(mix64(h));
  x[i] = px;
  y[i] = py;
  float inv_var = 1.0f / (range_sigma * range_sigma);
  float loglik = 0.0f;
  for (int b = 0; b < n_beacons; ++b) {
    float4 beacon = beacons[b];
    float dx = px - beacon.x, dy = py - beacon.y;
    float err = sqrtf(dx * dx + dy * dy) - beacon.z;
    loglik += logf(expf(-0.5f * err * err * inv_var) + kOutlier);
  }
  weight[i] = expf(loglik - n_beacons * logf(1.0f + kOutlier));
}

// The exclusive prefix sum of v over the block, in a fixed order, and the
// block's total.
__device__ double block_exclusive_scan(double v, double *total) {
  __shared__ double s[kSumsThreads];
  const int t = threadIdx.x;
  s[t] = v;
  __syncthreads();
  for (int offset = 1; offset < int(blockDim.x); offset *= 2) {
    double add = t >= offset ? s[t - offset] : 0.0;
    __syncthreads();
    s[t] += add;
    __syncthreads();
  }
  double inclusive = s[t];
  *total = s[blockDim.x - 1];
  __syncthreads(); // s is reused by the next call
  return inclusive - v;
}

// cdf[i] = the inclusive sum of weight over the scan tile of i (kItems per
// thread); tile_sums[tile] = the tile's total.
__global__ void scan_tiles(int n, const float *weight, double *cdf, double *tile_sums) {
  const long first = long(blockIdx.x) * kScanTile + long(threadIdx.x) * kItems;
  double local[kItems], run = 0.0;
  for (int k = 0; k < kItems; ++k) {
    long i = first + k;
    run += i < n ? double(weight[i]) : 0.0;
    local[k] = run;
  }
  double total;
  double offset = block_exclusive_scan(run, &total);
  for (int k = 0; k < kItems; ++k) {
    long i = first + k;
    if (i < n)
      cdf[i] = offset + local[k];
  }
  if (threadIdx.x == 0)
    tile_sums[blockIdx.x] = total;
}

// sums[0..m) becomes its exclusive prefix sum; one block, each thread
// taking a run of consecutive entries.
__global__ void scan_tile_sums(int m, double *sums) {
  const int per = (m + blockDim.x - 1) / blockDim.x;
  const int first = threadIdx.x * per;
  double run = 0.0;
  for (int k = first; k < first + per && k < m; ++k)
    run += sums[k];
  double total;
  double offset = block_exclusive_scan(run, &total);
  for (int k = first; k < first + per && k < m; ++k) {
    double v = sums[k];
    sums[k] = offset;
    offset += v;
  }
}

__global__ void add_tile_offsets(int n, double *cdf, const double *offsets) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    cdf[i] += offsets[i / kScanTile];
}

// Systematic resampling: new particle i copies the first particle whose
// cumulative weight passes (u0 + i) / n of the total.
__global__ void resample(int n, const double *cdf, double u0, const float *x, const float *y,
                         float *new_x, float *new_y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  const double target = (u0 + i) * (cdf[n - 1] / n);
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (cdf[mid] > target)
      hi = mid;
    else
      lo = mid + 1;
  }
  new_x[i] = x[lo];
  new_y[i] = y[lo];
}

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 1 << 22;
  int n_beacons = argc > 2 ? std::atoi(argv[2]) : 64;
  int steps = argc > 3 ? std::atoi(argv[3]) : 4;
  if (n < 1 || n > (1 << 26) || n_beacons < 1 || n_beacons > 4096 || steps < 1 ||
      steps > 1000) {
    std::fprintf(stderr, "usage: particle_filter [1 <= particles <= 2^26] "
                         "[1 <= beacons <= 4096] [1 <= steps <= 1000]\n");
    return 2;
  }
  uint64_t state = 4242;
  auto next = [&] { // 53-bit uniform in [0, 1)
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return double(state >> 11) / double(1ULL << 53);
  };
  auto normal = [&] { // Box-Muller
    double u = 1.0 - next(), v = next();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  };
  // Beacons scattered over a 100 x 100 field; the target starts in the
  // middle and the particles anywhere in a 20 x 20 box around it.
  const float vx = 0.8f, vy = -0.5f, motion_sigma = 0.3f, range_sigma = 1.0f;
  const double noise_sigma = 0.5; // of the measured ranges
  std::vector<float4> beacons(n_beacons);
  for (float4 &b : beacons)
    b = make_float4(float(100 * next()), float(100 * next()), 0.0f, 0.0f);
  double tx = 50.0, ty = 50.0;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = float(tx - 10 + 20 * next());
    y[i] = float(ty - 10 + 20 * next());
  }
  const int tiles = (n + kScanTile - 1) / kScanTile;
  float *d_x, *d_y, *d_nx, *d_ny, *d_w;
  double *d_cdf, *d_sums;
  float4 *d_beacons;
  for (float **p : {&d_x, &d_y, &d_nx, &d_ny, &d_w})
    CHECK(cudaMalloc(p, n * sizeof(float)));
  CHECK(cudaMalloc(&d_cdf, n * sizeof(double)));
  CHECK(cudaMalloc(&d_sums, tiles * sizeof(double)));
  CHECK(cudaMalloc(&d_beacons, n_beacons * sizeof(float4)));
  CHECK(cudaMemcpy(d_x, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_y, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const int blocks = (n + kThreads - 1) / kThreads;
  for (int s = 0; s < steps; ++s) {
    tx += vx;
    ty += vy;
    for (float4 &b : beacons)
      b.z = float(std::hypot(tx - b.x, ty - b.y) + noise_sigma * normal());
    CHECK(cudaMemcpy(d_beacons, beacons.data(), n_beacons * sizeof(float4),
                     cudaMemcpyHostToDevice));
    predict_weigh<<<blocks, kThreads>>>(n, d_x, d_y, d_w, d_beacons, n_beacons, vx, vy,
                                        motion_sigma, range_sigma, s);
    scan_tiles<<<tiles, kThreads>>>(n, d_w, d_cdf, d_sums);
    scan_tile_sums<<<1, kSumsThreads>>>(tiles, d_sums);
    add_tile_offsets<<<blocks, kThreads>>>(n, d_cdf, d_sums);
    resample<<<blocks, kThreads>>>(n, d_cdf, next(), d_x, d_y, d_nx, d_ny);
    std::swap(d_x, d_nx);
    std::swap(d_y, d_ny);
  }
  CHECK(cudaGetLastError());
  std::vector<double> cdf(n);
  CHECK(cudaMemcpy(x.data(), d_x, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(y.data(), d_y, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(cdf.data(), d_cdf, n * sizeof(double), cudaMemcpyDeviceToHost));
  double mx = 0.0, my = 0.0;
  for (int i = 0; i < n; ++i) {
    mx += x[i];
    my += y[i];
  }
  std::printf("particle_filter particles=%d beacons=%d steps=%d estimate=(%.4f, %.4f) "
              "truth=(%.4f, %.4f) state=%016llx cdf=%016llx\n",
              n, n_beacons, steps, mx / n, my / n, tx, ty,
              (unsigned long long)(fnv1a(x.data(), n * sizeof(float)) * 31 +
                                   fnv1a(y.data(), n * sizeof(float))),
              (unsigned long long)fnv1a(cdf.data(), n * sizeof(double)));
  for (void *p : {(void *)d_x, (void *)d_y, (void *)d_nx, (void *)d_ny, (void *)d_w,
                  (void *)d_cdf, (void *)d_sums, (void *)d_beacons})
    CHECK(cudaFree(p));
  return 0;
}
