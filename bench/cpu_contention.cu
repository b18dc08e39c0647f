// What work on other processors costs a GPU application's host thread: an
// application loop pinned to processor 0 (STEPS times: LAUNCHES reductions
// over N doubles, then an 8-byte synchronous copy) timed beside threads
// pinned to the processors given, each compressing 1 MiB chunks at zstd
// level 1 the way the recorder's writer does, copying them, or spinning.
// Prints the loop's time and the load's rate.
//
//   nvcc -O2 -arch=sm_90 -o /tmp/cpu_contention bench/cpu_contention.cu -lzstd
//   /tmp/cpu_contention LOAD CPUS [N=1048576] [LAUNCHES=4] [STEPS=4000]
//
// LOAD: zstd, copy or spin; CPUS: a comma-separated list of processors for
// the load's threads (one each), or - for the loop alone.
#include "contention.cuh"

#include <pthread.h>
#include <sched.h>
#include <zstd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

// A thread left unpinned would measure contention nobody asked for.
static void pinTo(int Cpu) {
  cpu_set_t Set;
  CPU_ZERO(&Set);
  CPU_SET(Cpu, &Set);
  if (Cpu < 0 || Cpu >= CPU_SETSIZE || pthread_setaffinity_np(pthread_self(), sizeof Set, &Set)) {
    std::printf("cannot run on processor %d\n", Cpu);
    std::exit(2);
  }
}

int main(int argc, char **argv) {
  if (argc < 3) {
    std::printf("usage: %s zstd|copy|spin CPUS|- [N] [LAUNCHES] [STEPS]\n", argv[0]);
    return 2;
  }
  const std::string Load = argv[1];
  std::vector<int> Cpus;
  for (char *P = argv[2]; *P && std::strcmp(argv[2], "-") != 0;) {
    char *End;
    Cpus.push_back(static_cast<int>(std::strtol(P, &End, 10)));
    if (End == P || (*End && *End != ',')) {
      std::printf("CPUS: a comma-separated list of processor numbers, or -; not %s\n", argv[2]);
      return 2;
    }
    P = *End ? End + 1 : End;
  }
  const size_t N = argc > 3 ? std::atol(argv[3]) : (1u << 20);
  const int Launches = argc > 4 ? std::atoi(argv[4]) : 4;
  const int Steps = argc > 5 ? std::atoi(argv[5]) : 4000;

  pinTo(0);
  CHECK(cudaSetDevice(0));
  double *X, *Out;
  CHECK(cudaMalloc(&X, N * 8));
  CHECK(cudaMemset(X, 0, N * 8));
  CHECK(cudaMalloc(&Out, 8));
  CHECK(cudaDeviceSynchronize());

  // Doubles with a simulation's regularity, so zstd compresses them partly.
  const size_t Chunk = 1 << 20, Bytes = 64ull << 20, Chunks = Bytes / Chunk;
  std::vector<double> Source(Bytes / 8);
  for (size_t I = 0; I < Source.size(); ++I)
    Source[I] = (I % 977) * 0.25 + static_cast<double>(I / 4096);
  std::atomic<bool> Stop{false};
  std::atomic<size_t> ChunksDone{0};
  std::vector<std::thread> Loaders;
  for (int Cpu : Cpus)
    Loaders.emplace_back([&, Cpu] {
      pinTo(Cpu);
      std::vector<char> Target(ZSTD_compressBound(Chunk) + Bytes);
      ZSTD_CCtx *Context = ZSTD_createCCtx();
      volatile double Sink = 0;
      for (size_t K = 0; !Stop; ++K) {
        const char *From = reinterpret_cast<const char *>(Source.data()) + (K % Chunks) * Chunk;
        if (Load == "zstd") {
          ZSTD_compressCCtx(Context, Target.data(), Target.size(), From, Chunk, 1);
        } else if (Load == "copy") {
          std::memcpy(Target.data() + (K % Chunks) * Chunk, From, Chunk);
        } else {
          double A = 1;
          for (int I = 0; I < 200000; ++I)
            A = A * 1.0000001 + 1e-9;
          Sink = A;
        }
        ++ChunksDone;
      }
      ZSTD_freeCCtx(Context);
    });

  std::this_thread::sleep_for(std::chrono::milliseconds(50)); // the load under way
  const size_t Before = ChunksDone;
  double Result;
  const double T0 = now();
  for (int I = 0; I < Steps; ++I) {
    for (int L = 0; L < Launches; ++L)
      reduce<<<132, 256>>>(X, Out, N);
    CHECK(cudaMemcpy(&Result, Out, 8, cudaMemcpyDeviceToHost));
  }
  const double Seconds = now() - T0;
  const size_t Done = ChunksDone - Before;
  Stop = true;
  for (std::thread &T : Loaders)
    T.join();
  std::printf("%s cpus=%s loop %.1f ms  load %.2f GB/s\n", Load.c_str(), argv[2], Seconds * 1e3,
              Done * static_cast<double>(Chunk) / Seconds / 1e9);
}
