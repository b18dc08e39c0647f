// The content hash of the snapshot store: 128 bits, computed identically on
// the CPU (this header) and on the GPU (recorder/HashKernel.cu includes it).
//
// The input is read as little-endian 64-bit words (the last one zero-padded).
// Each word is mixed with its index and the mixed values are *summed*, so
// the sum is order-independent and a GPU block can reduce it in any order;
// the length is folded in at the end.  It identifies content; it is not a
// defence against adversarial collisions.  Specified in docs/record-db.md.
#ifndef MNEME_CONTENT_HASH_H
#define MNEME_CONTENT_HASH_H

#include <cstddef>
#include <cstdint>
#include <string>

#if defined(__CUDACC__)
#define MNEME_HD __host__ __device__ __forceinline__
#else
#define MNEME_HD inline
#endif

namespace mneme::content_hash {

struct Digest {
  uint64_t Lo = 0, Hi = 0;
  bool operator==(const Digest &O) const { return Lo == O.Lo && Hi == O.Hi; }
  bool operator!=(const Digest &O) const { return !(*this == O); }
};

inline constexpr uint64_t K1 = 0x9e3779b97f4a7c15ULL;
inline constexpr uint64_t K2 = 0xc2b2ae3d27d4eb4fULL;
inline constexpr uint64_t K3 = 0x165667b19e3779f9ULL;

MNEME_HD uint64_t fmix64(uint64_t X) {
  X ^= X >> 33;
  X *= 0xff51afd7ed558ccdULL;
  X ^= X >> 33;
  X *= 0xc4ceb9fe1a85ec53ULL;
  X ^= X >> 33;
  return X;
}

MNEME_HD uint64_t rotl64(uint64_t X, int R) { return (X << R) | (X >> (64 - R)); }

// Adds a word to the running sums, given its index's multiples
// (Index + 1) * K1 and (Index + 1) * K2: a walk over consecutive words
// advances them by addition.
MNEME_HD void absorbAt(uint64_t Word, uint64_t M1, uint64_t M2, uint64_t &Lo, uint64_t &Hi) {
  Lo += fmix64(Word + M1);
  Hi += fmix64(rotl64(Word, 29) ^ M2);
}

// Adds word number Index to the running sums.
MNEME_HD void absorb(uint64_t Word, uint64_t Index, uint64_t &Lo, uint64_t &Hi) {
  absorbAt(Word, (Index + 1) * K1, (Index + 1) * K2, Lo, Hi);
}

MNEME_HD Digest finish(uint64_t Lo, uint64_t Hi, uint64_t Size) {
  Digest D;
  D.Lo = fmix64(Lo ^ (Size * K3) ^ K2);
  D.Hi = fmix64(Hi + D.Lo + Size);
  return D;
}

// The hash of Size bytes at Data.
Digest hash(const void *Data, size_t Size);

// 32 lowercase hex digits, Hi first: the chunk's name in the store.
std::string toHex(const Digest &D);
// Parses toHex's output; false for anything else.
bool fromHex(const std::string &Text, Digest &D);

} // namespace mneme::content_hash

#endif
