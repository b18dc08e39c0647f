// When a CUDA process's exit is paid: runs itself as a child, alternately
// with no other thread and with THREADS idle threads alive at the exit, and
// prints, per kind of child, the median of
//   - its exit: from an exit handler that runs after the CUDA runtime's to
//     its parent's waitpid returning (the rest of the exit handlers, the
//     libraries' destructors and the kernel's part);
//   - the next child's context creation (cudaFree(0)), by which kind ran
//     just before it.
// A short exit with the next context slow means the driver finished the
// teardown after the process was reaped, and the next process waited for it:
// what bench/record_overhead.py's pause between runs (--settle) keeps out of
// its ratios.
//
//   nvcc -O2 -std=c++17 -arch=sm_90 -o /tmp/exit_teardown bench/exit_teardown.cu
//   /tmp/exit_teardown [REPEATS=15] [THREADS=20]
#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

long long nowNs() {
  timespec T;
  clock_gettime(CLOCK_MONOTONIC, &T);
  return T.tv_sec * 1000000000LL + T.tv_nsec;
}

__global__ void touch(float *P, size_t N) {
  size_t I = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (I < N)
    P[I] += 1;
}

int ReportFd = -1;

// Registered before the CUDA runtime starts, so it runs after the runtime's
// exit handler (the module's own handler, registered before main, and the
// libraries' destructors still follow).
void reportExit() {
  long long T = nowNs();
  if (write(ReportFd, &T, sizeof T) != sizeof T)
    _exit(3);
}

// A child: the context, a few allocations and a kernel, Threads idle
// threads; reports its context creation's ns, then its exit's start.
int child(int Fd, int Threads) {
  ReportFd = Fd;
  std::atexit(reportExit);
  long long T0 = nowNs();
  if (cudaFree(nullptr) != cudaSuccess)
    return 2;
  long long Context = nowNs() - T0;
  if (write(Fd, &Context, sizeof Context) != sizeof Context)
    return 3;
  const size_t N = 4 << 20;
  for (int I = 0; I < 6; ++I) {
    float *P = nullptr;
    if (cudaMalloc(&P, N * sizeof(float)) != cudaSuccess)
      return 2;
    cudaMemset(P, 0, N * sizeof(float));
    touch<<<N / 256, 256>>>(P, N);
  }
  if (cudaDeviceSynchronize() != cudaSuccess)
    return 2;
  // Never destroyed: the threads still wait on them while the process exits.
  auto *Lock = new std::mutex;
  auto *Never = new std::condition_variable;
  for (int I = 0; I < Threads; ++I)
    std::thread([Lock, Never] {
      std::unique_lock<std::mutex> G(*Lock);
      Never->wait(G, [] { return false; });
    }).detach();
  return 0;
}

double median(std::vector<double> V) {
  std::sort(V.begin(), V.end());
  return V.empty() ? 0 : V[V.size() / 2];
}

} // namespace

int main(int Argc, char **Argv) {
  if (Argc == 4 && std::string(Argv[1]) == "child")
    return child(std::atoi(Argv[2]), std::atoi(Argv[3]));
  int Repeats = Argc > 1 ? std::atoi(Argv[1]) : 15;
  int Threads = Argc > 2 ? std::atoi(Argv[2]) : 20;
  if (Repeats < 1 || Threads < 1) {
    std::fprintf(stderr, "usage: %s [REPEATS>=1] [THREADS>=1]\n", Argv[0]);
    return 2;
  }
  // [kind]: the child's exit; [kind before]: the next child's context (ms).
  std::vector<double> Exit[2], ContextAfter[2];
  int Previous = -1;
  for (int R = 0; R < 2 * Repeats + 1; ++R) {
    int Kind = R % 2;
    int Pipe[2];
    if (pipe(Pipe) != 0)
      return 1;
    pid_t Pid = fork();
    if (Pid == 0) {
      close(Pipe[0]);
      std::string Fd = std::to_string(Pipe[1]), Count = std::to_string(Kind ? Threads : 0);
      execl("/proc/self/exe", Argv[0], "child", Fd.c_str(), Count.c_str(), nullptr);
      _exit(127);
    }
    close(Pipe[1]);
    long long Context = 0, ExitAt = 0;
    bool Read = read(Pipe[0], &Context, sizeof Context) == sizeof Context &&
                read(Pipe[0], &ExitAt, sizeof ExitAt) == sizeof ExitAt;
    int Status = 0;
    waitpid(Pid, &Status, 0);
    long long Reaped = nowNs();
    close(Pipe[0]);
    if (!Read || !WIFEXITED(Status) || WEXITSTATUS(Status) != 0) {
      std::fprintf(stderr, "a child failed (status %d)\n", Status);
      return 1;
    }
    if (Previous >= 0) // the first child warms the driver and the file cache
      ContextAfter[Previous].push_back(Context / 1e6);
    if (R > 0)
      Exit[Kind].push_back((Reaped - ExitAt) / 1e6);
    Previous = Kind;
  }
  const char *Names[2] = {"no other thread", "idle threads"};
  for (int K = 0; K < 2; ++K)
    std::printf("%-16s (%2d): exit %6.1f ms (%.1f-%.1f); the next context %6.1f ms\n",
                Names[K], K ? Threads : 0, median(Exit[K]),
                *std::min_element(Exit[K].begin(), Exit[K].end()),
                *std::max_element(Exit[K].begin(), Exit[K].end()), median(ContextAfter[K]));
  return 0;
}
