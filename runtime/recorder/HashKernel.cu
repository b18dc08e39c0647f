// The recorder's device code. mneme_hash_pieces and mneme_hash_finish are
// the GPU half of the content hash (mneme/ContentHash.h has the CPU half):
// a snapshot hashes all device memory at memory bandwidth, a digest per
// chunk, and copies to the host only chunks the store does not hold.
// Compiled to PTX at build time and loaded by the recorder with the driver.
// mneme_hold (at the end) keeps a stream busy before a timed launch.
#include "mneme/ContentHash.h"

using namespace mneme::content_hash;

// A contiguous stretch of device memory; its chunks are numbered from First
// in one numbering over every range a snapshot hashes.
struct HashRange {
  unsigned long long Address, Size, First;
};

// The range chunk number Chunk lies in (Ranges sorted by First, none empty).
__device__ const HashRange &rangeOf(const HashRange *Ranges, unsigned Count,
                                    unsigned long long Chunk) {
  unsigned Lo = 0, Hi = Count - 1;
  while (Lo < Hi) {
    unsigned Mid = (Lo + Hi + 1) / 2;
    if (Ranges[Mid].First <= Chunk)
      Lo = Mid;
    else
      Hi = Mid - 1;
  }
  return Ranges[Lo];
}

// Block (chunk, piece) adds the mixed words of one PieceSize piece of a chunk
// into Sums[2 * chunk] and Sums[2 * chunk + 1]. A chunk hashed by one block
// reads it as a chain of dependent loads (one wave of small chunks leaves
// most of the GPU idle); pieces spread every chunk over the GPU, and one
// launch covers every range, so a snapshot of small regions costs the
// memory's read time and not a launch and a chain per region. The sums are
// modular and order-independent, so atomic adds keep the digest exact.
extern "C" __global__ void mneme_hash_pieces(const HashRange *Ranges, unsigned Count,
                                             unsigned long long ChunkSize,
                                             unsigned long long PieceSize,
                                             unsigned long long *Sums) {
  __shared__ unsigned long long PartLo[32], PartHi[32];
  const unsigned long long Chunk = blockIdx.x;
  const HashRange &R = rangeOf(Ranges, Count, Chunk);
  const unsigned long long Offset = (Chunk - R.First) * ChunkSize;
  const unsigned long long N = R.Size - Offset < ChunkSize ? R.Size - Offset : ChunkSize;
  const unsigned long long Begin = blockIdx.y * PieceSize;
  if (Begin >= N)
    return; // the chunk's last piece lies further on
  const unsigned char *P = reinterpret_cast<const unsigned char *>(R.Address + Offset);
  const unsigned long long Words = (N + 7) / 8, FullWords = N / 8;
  const unsigned long long First = Begin / 8;
  const unsigned long long End = First + PieceSize / 8 < Words ? First + PieceSize / 8 : Words;
  const unsigned long long Step = blockDim.x;
  uint64_t Lo = 0, Hi = 0;
  unsigned long long I = First + threadIdx.x;
  if ((reinterpret_cast<unsigned long long>(P + Begin) & 15) == 0) {
    // Two whole words per 16-byte load, four loads in flight; each word is
    // mixed with its own index, whose multiples advance by addition.
    const ulonglong2 *W = reinterpret_cast<const ulonglong2 *>(P + Begin);
    const unsigned long long Last = End < FullWords ? End : FullWords;
    const unsigned long long Pairs = Last > First ? (Last - First) / 2 : 0;
    unsigned long long Pair = threadIdx.x;
    uint64_t M1 = (First + 2 * Pair + 1) * K1, M2 = (First + 2 * Pair + 1) * K2;
    const uint64_t D1 = 2 * Step * K1, D2 = 2 * Step * K2;
    auto Mix = [&](ulonglong2 V) {
      absorbAt(V.x, M1, M2, Lo, Hi);
      absorbAt(V.y, M1 + K1, M2 + K2, Lo, Hi);
      M1 += D1;
      M2 += D2;
    };
    for (; Pair + 3 * Step < Pairs; Pair += 4 * Step) {
      ulonglong2 A = W[Pair], B = W[Pair + Step], C = W[Pair + 2 * Step], D = W[Pair + 3 * Step];
      Mix(A);
      Mix(B);
      Mix(C);
      Mix(D);
    }
    for (; Pair < Pairs; Pair += Step)
      Mix(W[Pair]);
    I = First + 2 * Pairs + threadIdx.x;
  }
  const bool Aligned = (reinterpret_cast<unsigned long long>(P) & 7) == 0;
  for (; I < End; I += Step) {
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
  // Reduce across the warp, then the block, then into the chunk's sums.
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
  if (Lane == 0) {
    atomicAdd(&Sums[2 * Chunk], static_cast<unsigned long long>(Lo));
    atomicAdd(&Sums[2 * Chunk + 1], static_cast<unsigned long long>(Hi));
  }
}

// Each chunk's digest from its sums and length.
extern "C" __global__ void mneme_hash_finish(const HashRange *Ranges, unsigned Count,
                                             unsigned long long ChunkSize,
                                             unsigned long long Chunks,
                                             const unsigned long long *Sums, Digest *Out) {
  const unsigned long long Chunk = blockIdx.x * static_cast<unsigned long long>(blockDim.x) +
                                   threadIdx.x;
  if (Chunk >= Chunks)
    return;
  const HashRange &R = rangeOf(Ranges, Count, Chunk);
  const unsigned long long Offset = (Chunk - R.First) * ChunkSize;
  const unsigned long long N = R.Size - Offset < ChunkSize ? R.Size - Offset : ChunkSize;
  Out[Chunk] = finish(Sums[2 * Chunk], Sums[2 * Chunk + 1], N);
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
