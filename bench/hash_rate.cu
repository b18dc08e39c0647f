// The recorder's snapshot hash against the memory's read rate: hashes
// SIZE_MIB of device memory split into REGIONS equal regions, in 1 MiB
// chunks (a digest each), with the recorder's kernels launched as the
// recorder launches them (one piece kernel and one finishing kernel over
// every region), and reads the same bytes with a kernel that only sums them
// (the ceiling). Prints the median of 20 of each in ms and GB/s, then checks
// the digests against the CPU's content hash (mneme/ContentHash.h) for
// aligned, 8-byte-aligned and unaligned regions of odd sizes, with 1 MiB
// chunks (8 pieces each) and with 4104-byte ones (one piece, not a multiple
// of 16 bytes).
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -Iruntime/include -o /tmp/hash_rate \
//        bench/hash_rate.cu runtime/src/ContentHash.cpp
//   /tmp/hash_rate [SIZE_MIB=1024] [REGIONS=1]   (SIZE_MIB at least 8)
#include "../runtime/recorder/HashKernel.cu"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(X)                                                                       \
  do {                                                                                 \
    cudaError_t E = (X);                                                               \
    if (E != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s: %s\n", #X, cudaGetErrorString(E));                     \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

constexpr unsigned long long Piece = 128 << 10;

// Digests of every chunk of Regions (address, size), as DeviceSnapshot::hash
// computes them, into Out.
struct Hasher {
  unsigned long long Chunk;
  HashRange *Table;
  unsigned long long *Sums;
  Digest *Out;
  unsigned long long Total = 0;
  unsigned Count = 0;

  Hasher(const std::vector<std::pair<const unsigned char *, unsigned long long>> &Regions,
         unsigned long long ChunkSize = 1 << 20)
      : Chunk(ChunkSize) {
    std::vector<HashRange> Host;
    for (auto [Address, Size] : Regions) {
      if (Size == 0)
        continue;
      Host.push_back({reinterpret_cast<unsigned long long>(Address), Size, Total});
      Total += (Size + Chunk - 1) / Chunk;
    }
    Count = Host.size();
    CHECK(cudaMalloc(&Table, Host.size() * sizeof(HashRange)));
    CHECK(cudaMemcpy(Table, Host.data(), Host.size() * sizeof(HashRange),
                     cudaMemcpyHostToDevice));
    CHECK(cudaMalloc(&Sums, 2 * Total * sizeof(unsigned long long)));
    CHECK(cudaMalloc(&Out, Total * sizeof(Digest)));
  }
  ~Hasher() {
    cudaFree(Table);
    cudaFree(Sums);
    cudaFree(Out);
  }
  void run() {
    const unsigned long long P = std::min(Chunk, Piece);
    CHECK(cudaMemsetAsync(Sums, 0, 2 * Total * sizeof(unsigned long long)));
    mneme_hash_pieces<<<dim3(Total, (Chunk + P - 1) / P), 256>>>(Table, Count, Chunk, P, Sums);
    mneme_hash_finish<<<(Total + 255) / 256, 256>>>(Table, Count, Chunk, Total, Sums, Out);
    CHECK(cudaGetLastError());
  }
  std::vector<Digest> digests() {
    std::vector<Digest> D(Total);
    CHECK(cudaMemcpy(D.data(), Out, Total * sizeof(Digest), cudaMemcpyDeviceToHost));
    return D;
  }
};

// Reads every byte once (the ceiling on any hash of them).
__global__ void read_only(const ulonglong2 *W, unsigned long long Pairs, uint64_t *Sink) {
  uint64_t S = 0;
  for (unsigned long long I = blockIdx.x * blockDim.x + threadIdx.x; I < Pairs;
       I += gridDim.x * blockDim.x)
    S += W[I].x ^ W[I].y;
  if (S == 42)
    *Sink = S;
}

template <typename Launch> float median_ms(Launch L) {
  cudaEvent_t A, B;
  CHECK(cudaEventCreate(&A));
  CHECK(cudaEventCreate(&B));
  std::vector<float> Ms;
  L();
  for (int R = 0; R < 20; ++R) {
    CHECK(cudaEventRecord(A));
    L();
    CHECK(cudaEventRecord(B));
    CHECK(cudaEventSynchronize(B));
    float T;
    CHECK(cudaEventElapsedTime(&T, A, B));
    Ms.push_back(T);
  }
  std::sort(Ms.begin(), Ms.end());
  return Ms[Ms.size() / 2];
}

int main(int argc, char **argv) {
  const unsigned long long Size = (argc > 1 ? std::atoll(argv[1]) : 1024) << 20;
  const unsigned Regions = argc > 2 ? std::atoi(argv[2]) : 1;
  if (Size < (8ULL << 20) || Regions == 0 || Size / Regions < 64) {
    std::fprintf(stderr, "usage: %s [SIZE_MIB >= 8] [REGIONS > 0]\n", argv[0]);
    return 2;
  }
  unsigned char *Data;
  uint64_t *Sink;
  CHECK(cudaMalloc(&Data, Size + 16));
  CHECK(cudaMalloc(&Sink, 8));
  std::vector<unsigned char> Host(Size + 16);
  uint64_t X = 0x9e3779b97f4a7c15ULL;
  for (unsigned long long I = 0; I < Host.size(); ++I) {
    X ^= X << 13, X ^= X >> 7, X ^= X << 17;
    Host[I] = static_cast<unsigned char>(X);
  }
  CHECK(cudaMemcpy(Data, Host.data(), Host.size(), cudaMemcpyHostToDevice));
  std::vector<std::pair<const unsigned char *, unsigned long long>> Split;
  for (unsigned R = 0; R < Regions; ++R)
    Split.push_back({Data + R * (Size / Regions), Size / Regions});
  Hasher Snapshot(Split);
  auto Rate = [&](float Ms) { return Size / (Ms * 1e6); };
  float Ms = median_ms([&] { Snapshot.run(); });
  std::printf("hash %8.3f ms %7.1f GB/s (%u region(s), %llu chunk(s))\n", Ms, Rate(Ms), Regions,
              Snapshot.Total);
  Ms = median_ms([&] {
    read_only<<<4 * 132, 512>>>(reinterpret_cast<const ulonglong2 *>(Data), Size / 16, Sink);
  });
  std::printf("read %8.3f ms %7.1f GB/s\n", Ms, Rate(Ms));

  // The digests against the CPU's: regions at offsets 0, 8 and 3 of odd
  // sizes (within 8 MiB), for two chunk sizes.
  int Bad = 0, Checked = 0;
  for (unsigned long long Chunk : {1ULL << 20, 4104ULL})
    for (unsigned long long Shift : {0ULL, 8ULL, 3ULL}) {
      std::vector<std::pair<const unsigned char *, unsigned long long>> Odd;
      unsigned long long At = Shift;
      for (unsigned long long Bytes :
           {3 * Chunk + 24, 5ULL, 0ULL, Chunk - 8, 1000ULL, Chunk + 13, 2 * Piece + 8}) {
        Odd.push_back({Data + At, Bytes});
        At += Bytes + 40;
      }
      Hasher Check(Odd, Chunk);
      Check.run();
      std::vector<Digest> Got = Check.digests();
      unsigned long long K = 0;
      for (auto [Address, Bytes] : Odd)
        for (unsigned long long Off = 0; Off < Bytes; Off += Chunk, ++K) {
          const unsigned char *P = Host.data() + (Address - Data) + Off;
          Bad += Got[K] != mneme::content_hash::hash(P, std::min(Chunk, Bytes - Off));
          ++Checked;
        }
    }
  std::printf("digests: %d of %d differ from the CPU's\n", Bad, Checked);
  return Bad ? 1 : 0;
}
