// A histogram of 16-bit samples (pixel intensities, detector ADC counts):
// each block bins a grid-stride share of the input into its own histogram
// in shared memory with integer atomics and writes it out, then a second
// kernel merges the per-block histograms bin by bin in block order.  The
// samples cluster around the middle of the range, as real signals do, so
// shared-memory contention, the bin count (a scalar argument that sizes
// the shared histogram and scales the bin index) and the block size decide
// the time.  Integer atomics commute: the counts are exact and the same on
// every run.
//   usage: histogram [samples=268435456] [bins=1024]
#include "check.h"

#include <vector>

constexpr int kThreads = 256;
constexpr int kBlocks = 1024;

// partial[block][bin]: how many of the block's samples fall in each of the
// bins equal slices of [0, 65536).
__global__ void block_histograms(const uint16_t *samples, long n, int bins, unsigned *partial) {
  extern __shared__ unsigned hist[];
  for (int b = threadIdx.x; b < bins; b += blockDim.x)
    hist[b] = 0;
  __syncthreads();
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n;
       i += long(gridDim.x) * blockDim.x) {
    unsigned bin = (unsigned(samples[i]) * unsigned(bins)) >> 16;
    atomicAdd(&hist[bin], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += blockDim.x)
    partial[long(blockIdx.x) * bins + b] = hist[b];
}

// hist[bin] = the sum over the blocks of partial[block][bin].
__global__ void merge_histograms(const unsigned *partial, int blocks, int bins, unsigned *hist) {
  int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= bins)
    return;
  unsigned sum = 0;
  for (int k = 0; k < blocks; ++k)
    sum += partial[long(k) * bins + b];
  hist[b] = sum;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? std::atol(argv[1]) : 1L << 28;
  int bins = argc > 2 ? std::atoi(argv[2]) : 1024;
  if (n < 1 || n > (1L << 29) || bins < 1 || bins > 8192) {
    std::fprintf(stderr, "usage: histogram [1 <= samples <= 2^29] [1 <= bins <= 8192]\n");
    return 2;
  }
  // Each sample sums four random bytes (a bell around the middle of the
  // range) plus six random low bits.
  std::vector<uint16_t> samples(n);
  uint64_t state = 555;
  for (long i = 0; i < n; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    unsigned bell = unsigned((state >> 32) & 0xff) + unsigned((state >> 40) & 0xff) +
                    unsigned((state >> 48) & 0xff) + unsigned(state >> 56);
    samples[i] = uint16_t(bell * 64 + ((state >> 20) & 63));
  }
  uint16_t *d_samples;
  unsigned *d_partial, *d_hist;
  CHECK(cudaMalloc(&d_samples, n * sizeof(uint16_t)));
  CHECK(cudaMalloc(&d_partial, long(kBlocks) * bins * sizeof(unsigned)));
  CHECK(cudaMalloc(&d_hist, bins * sizeof(unsigned)));
  CHECK(cudaMemcpy(d_samples, samples.data(), n * sizeof(uint16_t), cudaMemcpyHostToDevice));
  block_histograms<<<kBlocks, kThreads, bins * sizeof(unsigned)>>>(d_samples, n, bins, d_partial);
  merge_histograms<<<(bins + kThreads - 1) / kThreads, kThreads>>>(d_partial, kBlocks, bins,
                                                                   d_hist);
  CHECK(cudaGetLastError());
  std::vector<unsigned> hist(bins);
  CHECK(cudaMemcpy(hist.data(), d_hist, bins * sizeof(unsigned), cudaMemcpyDeviceToHost));
  long counted = 0;
  int fullest = 0;
  for (int b = 0; b < bins; ++b) {
    counted += hist[b];
    if (hist[b] > hist[fullest])
      fullest = b;
  }
  if (counted != n) {
    std::fprintf(stderr, "histogram: counted %ld of %ld samples\n", counted, n);
    return 1;
  }
  std::printf("histogram samples=%ld bins=%d counted=%ld fullest=%d(%u) checksum=%016llx\n", n,
              bins, counted, fullest, hist[fullest],
              (unsigned long long)fnv1a(hist.data(), bins * sizeof(unsigned)));
  CHECK(cudaFree(d_samples));
  CHECK(cudaFree(d_partial));
  CHECK(cudaFree(d_hist));
  return 0;
}
