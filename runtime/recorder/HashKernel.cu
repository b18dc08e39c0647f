// The recorder's device code. mneme_hash_chunks is the GPU half of the content
// hash (mneme/ContentHash.h has the CPU half):
// one block per chunk, so a snapshot hashes all device memory at memory
// bandwidth and copies to the host only chunks the store does not hold.
// Compiled to PTX at build time and loaded by the recorder with the driver.
// mneme_hold (at the end) keeps a stream busy before a timed launch.
#include "mneme/ContentHash.h"

using namespace mneme::content_hash;

extern "C" __global__ void mneme_hash_chunks(const unsigned char *Base,
                                             unsigned long long Size,
                                             unsigned long long ChunkSize,
                                             Digest *Out) {
  __shared__ unsigned long long PartLo[32], PartHi[32];
  unsigned long long Chunk = blockIdx.x;
  unsigned long long Start = Chunk * ChunkSize;
  unsigned long long N = Size - Start < ChunkSize ? Size - Start : ChunkSize;
  const unsigned char *P = Base + Start;
  unsigned long long Words = (N + 7) / 8, FullWords = N / 8;
  bool Aligned = (reinterpret_cast<unsigned long long>(P) & 7) == 0;

  uint64_t Lo = 0, Hi = 0;
  unsigned long long I = threadIdx.x;
  if (Aligned) {
    // Four loads in flight per thread: one block per chunk leaves an SM
    // too few threads to cover the memory's latency otherwise.
    const uint64_t *W = reinterpret_cast<const uint64_t *>(P);
    const unsigned long long Step = blockDim.x;
    for (; I + 3 * Step < FullWords; I += 4 * Step) {
      uint64_t A = W[I], B = W[I + Step], C = W[I + 2 * Step], D = W[I + 3 * Step];
      absorb(A, I, Lo, Hi);
      absorb(B, I + Step, Lo, Hi);
      absorb(C, I + 2 * Step, Lo, Hi);
      absorb(D, I + 3 * Step, Lo, Hi);
    }
  }
  for (; I < Words; I += blockDim.x) {
    uint64_t W = 0;
    if (Aligned && I < FullWords) {
      W = reinterpret_cast<const uint64_t *>(P)[I];
    } else {
      for (int B = 0; B < 8; ++B)
        if (8 * I + B < N)
          W |= static_cast<uint64_t>(P[8 * I + B]) << (8 * B);
    }
    absorb(W, I, Lo, Hi);
  }
  // The sums are order-independent: reduce across the warp, then the block.
  for (int Offset = 16; Offset > 0; Offset >>= 1) {
    Lo += __shfl_down_sync(0xffffffffu, Lo, Offset);
    Hi += __shfl_down_sync(0xffffffffu, Hi, Offset);
  }
  unsigned Lane = threadIdx.x & 31, Warp = threadIdx.x >> 5;
  if (Lane == 0) {
    PartLo[Warp] = Lo;
    PartHi[Warp] = Hi;
  }
  __syncthreads();
  if (Warp != 0)
    return;
  unsigned Warps = (blockDim.x + 31) / 32;
  Lo = Lane < Warps ? PartLo[Lane] : 0;
  Hi = Lane < Warps ? PartHi[Lane] : 0;
  for (int Offset = 16; Offset > 0; Offset >>= 1) {
    Lo += __shfl_down_sync(0xffffffffu, Lo, Offset);
    Hi += __shfl_down_sync(0xffffffffu, Hi, Offset);
  }
  if (Lane == 0)
    Out[Chunk] = finish(Lo, Hi, N);
}

// Keeps a stream busy for Nanoseconds, so that work the host issues next
// queues up behind it (the recorder times a launch without the host's launch
// latency this way).
extern "C" __global__ void mneme_hold(unsigned long long Nanoseconds) {
  unsigned long long Start, Now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(Start));
  do
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(Now));
  while (Now - Start < Nanoseconds);
}
