// What the recorder's own driver calls cost, one kind at a time: reserving
// the VA window (by its size), serving an allocation from it against
// cuMemAlloc, and setting up a fetcher (a stream and two pinned halves), each
// with its undoing. The medians of REPEATS, in ms, and the first of them:
// a process pays some kinds of call once.
//
//   nvcc -O2 -std=c++17 -o /tmp/recorder_start bench/recorder_start.cu -lcuda
//   /tmp/recorder_start [REPEATS]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

namespace {

double nowMs() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

void check(CUresult R, const char *What) {
  if (R == CUDA_SUCCESS)
    return;
  const char *Name = nullptr;
  cuGetErrorName(R, &Name);
  std::fprintf(stderr, "recorder_start: %s failed (%s)\n", What, Name ? Name : "?");
  std::exit(1);
}

double median(std::vector<double> V) {
  std::sort(V.begin(), V.end());
  return V[V.size() / 2];
}

// Runs Do then Undo Repeats times; prints the median of each.
void pair(const char *Label, int Repeats, const std::function<void()> &Do,
          const std::function<void()> &Undo) {
  std::vector<double> A, B;
  for (int I = 0; I < Repeats; ++I) {
    double T0 = nowMs();
    Do();
    double T1 = nowMs();
    Undo();
    A.push_back(T1 - T0);
    B.push_back(nowMs() - T1);
  }
  std::printf("%-44s %8.3f ms, undone in %8.3f ms (the first: %.3f, %.3f)\n", Label,
              median(A), median(B), A[0], B[0]);
}

} // namespace

int main(int argc, char **argv) {
  int Repeats = argc > 1 ? std::atoi(argv[1]) : 7;
  if (Repeats < 1) {
    std::fprintf(stderr, "recorder_start: REPEATS must be a positive count\n");
    return 2;
  }
  // The context as the recorder's start makes it: through the runtime.
  double T0 = nowMs();
  if (cudaFree(nullptr) != cudaSuccess) {
    std::fprintf(stderr, "recorder_start: no CUDA context could be made\n");
    return 1;
  }
  CUcontext Context;
  check(cuCtxGetCurrent(&Context), "cuCtxGetCurrent");
  if (!Context) {
    std::fprintf(stderr, "recorder_start: no context is current after cudaFree\n");
    return 1;
  }
  CUdevice Device;
  check(cuCtxGetDevice(&Device), "cuCtxGetDevice");
  std::printf("%-44s %8.3f ms\n", "context (cudaFree(nullptr))", nowMs() - T0);

  CUmemAllocationProp Prop = {};
  Prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  Prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  Prop.location.id = Device;
  T0 = nowMs();
  size_t Granule = 0, Total = 0;
  check(cuMemGetAllocationGranularity(&Granule, &Prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
        "cuMemGetAllocationGranularity");
  double T1 = nowMs();
  check(cuDeviceTotalMem(&Total, Device), "cuDeviceTotalMem");
  std::printf("%-44s %8.3f ms, total memory %.3f ms (granule %zu KiB)\n",
              "the first granularity query", T1 - T0, nowMs() - T1, Granule >> 10);

  // The window: the recorder's default is twice the device's memory at
  // 0x200000000000.
  const unsigned long long GiB = 1ULL << 30;
  const unsigned long long Twice = 2 * ((Total + Granule - 1) / Granule) * Granule;
  for (unsigned long long Size : {8 * GiB, 64 * GiB, Twice, 1024 * GiB}) {
    char Label[96];
    std::snprintf(Label, sizeof Label, "reserving %llu GiB at 0x200000000000", Size / GiB);
    CUdeviceptr Got = 0;
    bool AtHint = true;
    pair(Label, Repeats,
         [&] {
           check(cuMemAddressReserve(&Got, Size, Granule, 0x200000000000ULL, 0),
                 "cuMemAddressReserve");
           AtHint = AtHint && Got == 0x200000000000ULL;
         },
         [&] { check(cuMemAddressFree(Got, Size), "cuMemAddressFree"); });
    if (!AtHint)
      std::printf("  (not always at the hint: the recorder would try its next base)\n");
  }

  // A range that would end past 2^47, as `--va-base 0x7fffffe00000` asks:
  // the address is a hint, so the driver may refuse it or place it elsewhere.
  {
    CUdeviceptr Got = 0;
    CUresult Result = CUDA_SUCCESS;
    pair("reserving at 0x7fffffe00000 (ends past 2^47)", Repeats,
         [&] { Result = cuMemAddressReserve(&Got, Twice, Granule, 0x7fffffe00000ULL, 0); },
         [&] {
           if (Result == CUDA_SUCCESS)
             check(cuMemAddressFree(Got, Twice), "cuMemAddressFree");
         });
    const char *Name = nullptr;
    cuGetErrorName(Result, &Name);
    std::printf("  (the last: %s)\n", Result != CUDA_SUCCESS ? Name ? Name : "refused"
                                     : Got == 0x7fffffe00000ULL ? "placed at the hint"
                                                                : "placed elsewhere");
  }

  // An allocation served from a window against cuMemAlloc.
  CUdeviceptr Window = 0;
  const unsigned long long WindowBytes = 64 * GiB;
  check(cuMemAddressReserve(&Window, WindowBytes, Granule, 0x200000000000ULL, 0),
        "cuMemAddressReserve");
  for (unsigned long long Bytes : {2ULL << 20, 64ULL << 20, 1024ULL << 20}) {
    char Label[96];
    std::snprintf(Label, sizeof Label, "%llu MiB: create, map, set access", Bytes >> 20);
    CUmemGenericAllocationHandle Handle;
    pair(Label, Repeats,
         [&] {
           check(cuMemCreate(&Handle, Bytes, &Prop, 0), "cuMemCreate");
           check(cuMemMap(Window, Bytes, 0, Handle, 0), "cuMemMap");
           CUmemAccessDesc Access = {};
           Access.location = Prop.location;
           Access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
           check(cuMemSetAccess(Window, Bytes, &Access, 1), "cuMemSetAccess");
         },
         [&] {
           check(cuMemUnmap(Window, Bytes), "cuMemUnmap");
           check(cuMemRelease(Handle), "cuMemRelease");
         });
    std::snprintf(Label, sizeof Label, "%llu MiB: cuMemAlloc", Bytes >> 20);
    CUdeviceptr Plain = 0;
    pair(Label, Repeats, [&] { check(cuMemAlloc(&Plain, Bytes), "cuMemAlloc"); },
         [&] { check(cuMemFree(Plain), "cuMemFree"); });
  }
  check(cuMemAddressFree(Window, WindowBytes), "cuMemAddressFree");

  // A fetcher: a stream, two events and two pinned halves of 1 MiB.
  CUstream Stream;
  CUevent Events[2];
  void *Halves[2];
  pair("a fetcher (stream, 2 events, 2 x 1 MiB pinned)", Repeats,
       [&] {
         check(cuStreamCreate(&Stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
         for (int H = 0; H < 2; ++H) {
           check(cuEventCreate(&Events[H], CU_EVENT_DISABLE_TIMING), "cuEventCreate");
           check(cuMemAllocHost(&Halves[H], 1 << 20), "cuMemAllocHost");
         }
       },
       [&] {
         for (int H = 0; H < 2; ++H) {
           check(cuMemFreeHost(Halves[H]), "cuMemFreeHost");
           check(cuEventDestroy(Events[H]), "cuEventDestroy");
         }
         check(cuStreamDestroy(Stream), "cuStreamDestroy");
       });
  pair("a stream alone", Repeats,
       [&] { check(cuStreamCreate(&Stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"); },
       [&] { check(cuStreamDestroy(Stream), "cuStreamDestroy"); });
  pair("1 MiB pinned alone", Repeats,
       [&] { check(cuMemAllocHost(&Halves[0], 1 << 20), "cuMemAllocHost"); },
       [&] { check(cuMemFreeHost(Halves[0]), "cuMemFreeHost"); });
  // A fetch of a few MiB through pageable memory, no fetcher: what copying
  // a small recording's staged bytes at exit would cost without setting one up.
  CUdeviceptr Staged = 0;
  check(cuMemAlloc(&Staged, 8 << 20), "cuMemAlloc");
  std::vector<char> Host(8 << 20);
  pair("8 MiB to pageable memory, cuMemcpyDtoH", Repeats,
       [&] { check(cuMemcpyDtoH(Host.data(), Staged, Host.size()), "cuMemcpyDtoH"); }, [] {});
  check(cuMemFree(Staged), "cuMemFree");
  return 0;
}
