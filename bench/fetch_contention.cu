// What a background device-to-host fetch costs an application running beside
// it: an application loop (a reduction over 64 MiB, then an 8-byte
// synchronous copy of its result, `steps` times) timed alone and beside a
// thread that fetches 512 MiB over and over, the way the recorder's writer
// does or otherwise. Prints the loop's time, its copies' latency percentiles
// and the fetch's rate.
//
//   nvcc -O2 -arch=sm_90 -o /tmp/fetch_contention bench/fetch_contention.cu
//   /tmp/fetch_contention MODE [PIECE_KIB=1024] [STEPS=2000] [BLOCKS=4]
//
// MODE: none (the loop alone); ce (copies into two pinned halves of PIECE_KIB,
// an event and a wait each, then a memcpy out: the writer's pattern); sm (a
// kernel of BLOCKS blocks stores into the mapped pinned halves instead of the
// copy engine); page (one copy of PIECE_KIB straight into pageable memory,
// staged by the driver). A trailing b (ceb, smb) waits on blocking-sync events.
#include "contention.cuh"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

__global__ void push(const int4 *Src, int4 *Dst, size_t N) {
  for (size_t I = blockIdx.x * blockDim.x + threadIdx.x; I < N; I += gridDim.x * blockDim.x)
    Dst[I] = Src[I];
}

int main(int argc, char **argv) {
  if (argc < 2) {
    std::printf("usage: %s none|ce|ceb|sm|smb|page [PIECE_KIB] [STEPS] [BLOCKS]\n", argv[0]);
    return 2;
  }
  std::string Mode = argv[1];
  const bool Blocking = Mode.size() > 2 && Mode.back() == 'b';
  if (Blocking)
    Mode.pop_back();
  const size_t Piece = (argc > 2 ? std::atoi(argv[2]) : 1024) * 1024ull;
  const int Steps = argc > 3 ? std::atoi(argv[3]) : 2000;
  const int Blocks = argc > 4 ? std::atoi(argv[4]) : 4;

  CHECK(cudaSetDevice(0));
  const size_t N = 8u << 20; // 64 MiB of doubles per step
  double *X, *Out;
  CHECK(cudaMalloc(&X, N * 8));
  CHECK(cudaMemset(X, 0, N * 8));
  CHECK(cudaMalloc(&Out, 8));
  const size_t FetchBytes = 512ull << 20;
  char *Src;
  CHECK(cudaMalloc(&Src, FetchBytes));
  CHECK(cudaMemset(Src, 1, FetchBytes));
  std::vector<char> Host(FetchBytes, 0);
  char *Half[2];
  for (char *&H : Half)
    CHECK(cudaHostAlloc((void **)&H, Mode == "page" ? 4096 : Piece, cudaHostAllocMapped));
  cudaStream_t Stream;
  CHECK(cudaStreamCreateWithFlags(&Stream, cudaStreamNonBlocking));
  cudaEvent_t Done[2];
  for (cudaEvent_t &E : Done)
    CHECK(cudaEventCreateWithFlags(&E, cudaEventDisableTiming |
                                           (Blocking ? cudaEventBlockingSync : 0)));
  CHECK(cudaDeviceSynchronize());

  std::atomic<bool> Stop{false};
  std::atomic<size_t> Moved{0};
  std::thread Fetcher([&] {
    if (Mode == "none")
      return;
    CHECK(cudaSetDevice(0));
    const size_t Pieces = FetchBytes / Piece;
    for (size_t K = 0; !Stop; ++K) {
      const size_t At = (K % Pieces) * Piece;
      if (Mode == "page") {
        CHECK(cudaMemcpyAsync(Host.data() + At, Src + At, Piece, cudaMemcpyDeviceToHost, Stream));
        CHECK(cudaStreamSynchronize(Stream));
        Moved += Piece;
        continue;
      }
      if (Mode == "ce")
        CHECK(cudaMemcpyAsync(Half[K % 2], Src + At, Piece, cudaMemcpyDeviceToHost, Stream));
      else
        push<<<Blocks, 512, 0, Stream>>>((const int4 *)(Src + At), (int4 *)Half[K % 2],
                                         Piece / 16);
      CHECK(cudaEventRecord(Done[K % 2], Stream));
      if (K > 0) { // the DMA into one half overlaps the copy out of the other
        CHECK(cudaEventSynchronize(Done[(K - 1) % 2]));
        std::memcpy(Host.data() + ((K - 1) % Pieces) * Piece, Half[(K - 1) % 2], Piece);
        Moved += Piece;
      }
    }
    CHECK(cudaStreamSynchronize(Stream));
  });

  std::this_thread::sleep_for(std::chrono::milliseconds(50)); // the fetch under way
  const size_t MovedBefore = Moved;
  std::vector<double> Latency(Steps);
  double Result;
  const double T0 = now();
  for (int I = 0; I < Steps; ++I) {
    reduce<<<264, 256>>>(X, Out, N);
    const double A = now();
    CHECK(cudaMemcpy(&Result, Out, 8, cudaMemcpyDeviceToHost));
    Latency[I] = now() - A;
  }
  const double Seconds = now() - T0;
  const size_t Fetched = Moved - MovedBefore;
  Stop = true;
  Fetcher.join();
  std::sort(Latency.begin(), Latency.end());
  std::printf("%s%s piece=%zuKiB blocks=%d loop %.1f ms  copy p50 %.1f us p90 %.1f us "
              "p99 %.1f us  fetch %.1f GB/s\n",
              Mode.c_str(), Blocking ? "+blocking" : "", Piece >> 10, Blocks, Seconds * 1e3,
              Latency[Steps / 2] * 1e6, Latency[Steps * 9 / 10] * 1e6,
              Latency[Steps * 99 / 100] * 1e6, Fetched / Seconds / 1e9);
}
