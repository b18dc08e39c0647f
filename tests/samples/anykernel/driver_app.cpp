// A driver-API program: for each module image (PTX, cubin or fatbinary) it
// is given, in turn, loads it, writes one of its __device__ tables, launches
// its kernels with cuLaunchKernel and cuLaunchKernelEx and unloads it (a
// later module may get the handles the driver freed); then prints a
// checksum of the results. An image named `lib:FILE` is loaded as a library
// (cuLibraryLoadData) and used through its module (cuLibraryGetModule);
// `file:FILE` and `libfile:FILE` are loaded by the driver from the file
// (cuModuleLoad, cuLibraryLoadFromFile). With DRIVER_APP_EXTRA set, saxpy's
// arguments go packed in one buffer (`extra`), as PyCUDA passes them.
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#define CHECK(call)                                                                   \
  do {                                                                                \
    CUresult r_ = (call);                                                             \
    if (r_ != CUDA_SUCCESS) {                                                         \
      const char *s_ = nullptr;                                                       \
      cuGetErrorString(r_, &s_);                                                      \
      std::fprintf(stderr, "%s failed: %s\n", #call, s_ ? s_ : "?");                 \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: driver_app [lib:|file:|libfile:]MODULE(.ptx|.cubin|.fatbin)...\n");
    return 2;
  }
  CHECK(cuInit(0));
  CUdevice dev;
  CHECK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));

  const int n = 1 << 20;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = (i % 1000) * 0.001f;
    y[i] = (i % 33) * 0.25f;
  }
  CUdeviceptr dx, dy;
  CHECK(cuMemAlloc(&dx, n * sizeof(float)));
  CHECK(cuMemAlloc(&dy, n * sizeof(float)));
  CHECK(cuMemcpyHtoD(dx, x.data(), n * sizeof(float)));
  CHECK(cuMemcpyHtoD(dy, y.data(), n * sizeof(float)));
  for (int m = 1; m < argc; ++m) {
    std::string path = argv[m];
    size_t colon = path.find(':');
    std::string how = colon == std::string::npos ? "" : path.substr(0, colon);
    path = colon == std::string::npos ? path : path.substr(colon + 1);
    bool library = how == "lib" || how == "libfile";
    std::ifstream in(path, std::ios::binary);
    std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (image.empty()) {
      std::fprintf(stderr, "cannot read %s\n", argv[m]);
      return 2;
    }
    image.push_back('\0'); // PTX is a C string
    CUmodule module;
    CUlibrary lib = nullptr;
    if (how == "lib") {
      CHECK(cuLibraryLoadData(&lib, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    } else if (how == "libfile") {
      CHECK(cuLibraryLoadFromFile(&lib, path.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    } else if (how == "file") {
      CHECK(cuModuleLoad(&module, path.c_str()));
    } else {
      CHECK(cuModuleLoadData(&module, image.data()));
    }
    if (library)
      CHECK(cuLibraryGetModule(&module, lib));
    CUfunction saxpy, shift;
    CHECK(cuModuleGetFunction(&saxpy, module, "saxpy"));
    CHECK(cuModuleGetFunction(&shift, module, "shift"));
    float a = 2.5f;
    int count = n;
    void *saxpy_args[] = {&dy, &dx, &a, &count};
    // saxpy(float *y, const float *x, float a, int n), packed as the ABI lays it out.
    alignas(8) unsigned char packed[24];
    std::memcpy(packed, &dy, 8);
    std::memcpy(packed + 8, &dx, 8);
    std::memcpy(packed + 16, &a, 4);
    std::memcpy(packed + 20, &count, 4);
    size_t packed_size = sizeof packed;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                     &packed_size, CU_LAUNCH_PARAM_END};
    bool use_extra = std::getenv("DRIVER_APP_EXTRA") != nullptr;
    for (int step = 0; step < 2; ++step)
      CHECK(cuLaunchKernel(saxpy, n / 256, 1, 1, 256, 1, 1, 0, nullptr,
                           use_extra ? nullptr : saxpy_args, use_extra ? extra : nullptr));
    // The host rewrites a __device__ table of the module before shift reads it.
    CUdeviceptr bias;
    size_t bias_bytes = 0;
    CHECK(cuModuleGetGlobal(&bias, &bias_bytes, module, "bias"));
    const float table[4] = {0.5f, -2.0f, 1.25f, 4.0f};
    if (bias_bytes != sizeof table) {
      std::fprintf(stderr, "bias has %zu bytes\n", bias_bytes);
      return 1;
    }
    CHECK(cuMemcpyHtoD(bias, table, sizeof table));
    void *shift_args[] = {&dy, &count};
    CUlaunchConfig config = {};
    config.gridDimX = n / 128;
    config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = 128;
    config.blockDimY = config.blockDimZ = 1;
    CHECK(cuLaunchKernelEx(&config, shift, shift_args, nullptr));
    CHECK(cuCtxSynchronize());
    if (library)
      CHECK(cuLibraryUnload(lib));
    else
      CHECK(cuModuleUnload(module));
  }
  CHECK(cuMemcpyDtoH(y.data(), dy, n * sizeof(float)));
  uint64_t h = 1469598103934665603ull;
  for (float v : y) {
    const unsigned char *p = reinterpret_cast<const unsigned char *>(&v);
    for (int i = 0; i < 4; ++i)
      h = (h ^ p[i]) * 1099511628211ull;
  }
  std::printf("checksum %016llx\n", (unsigned long long)h);
  CHECK(cuMemFree(dx));
  CHECK(cuMemFree(dy));
  return 0;
}
