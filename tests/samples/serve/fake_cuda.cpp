// A stand-in for libcuda.so.1, so that the serving runtime runs end to end
// on a machine without a GPU: every driver function the runtime loads
// exists; the ones serving calls behave like a one-GPU driver and print what
// was launched.  FAKE_CC sets the compute capability (default 90).
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {

int cuCtxGetCurrent(void **Ctx) {
  *Ctx = reinterpret_cast<void *>(0x1000);
  return 0;
}

int cuCtxGetDevice(int *Device) {
  *Device = 0;
  return 0;
}

int cuDeviceGetAttribute(int *Value, int Attribute, int) {
  const char *CC = std::getenv("FAKE_CC");
  int V = CC ? std::atoi(CC) : 90;
  *Value = Attribute == 75 ? V / 10 : Attribute == 76 ? V % 10 : 0;
  return 0;
}

int cuModuleLoadData(void **Module, const void *Image) {
  if (std::memcmp(Image, "BAD", 3) == 0)
    return 200; // CUDA_ERROR_INVALID_IMAGE
  *Module = const_cast<void *>(Image);
  std::printf("load module\n");
  return 0;
}

// Every kernel of the stand-in cubins is kern(float *, int).
int cuFuncGetParamInfo(void *, size_t Index, size_t *Offset, size_t *Size) {
  if (Index > 1)
    return 1; // CUDA_ERROR_INVALID_VALUE
  *Offset = Index == 0 ? 0 : 8;
  *Size = Index == 0 ? 8 : 4;
  return 0;
}

int cuModuleGetFunction(void **Function, void *, const char *Name) {
  *Function = strdup(Name);
  return 0;
}

// The cubin has the module's global g_scale (4 bytes) and nothing else.
int cuModuleGetGlobal_v2(unsigned long long *Address, size_t *Bytes, void *, const char *Name) {
  if (std::strcmp(Name, "g_scale") != 0)
    return 500; // CUDA_ERROR_NOT_FOUND
  *Address = 0xc0de;
  *Bytes = 4;
  return 0;
}

int cuMemcpyDtoDAsync_v2(unsigned long long Dst, unsigned long long Src, size_t Bytes, void *) {
  std::printf("copy %llx <- %llx %zu\n", Dst, Src, Bytes);
  return 0;
}

int cuFuncSetAttribute(void *, int, int Value) {
  std::printf("max dynamic shared memory %d\n", Value);
  return 0;
}

int cuLaunchKernel(void *Function, unsigned GX, unsigned GY, unsigned GZ, unsigned BX,
                   unsigned BY, unsigned BZ, unsigned Smem, void *, void **Args, void **) {
  if (BX * BY * BZ > 1024)
    return 1; // CUDA_ERROR_INVALID_VALUE
  std::printf("served %s %u,%u,%u %u,%u,%u %u n=%d\n", static_cast<const char *>(Function), GX,
              GY, GZ, BX, BY, BZ, Smem, *static_cast<int *>(Args[1]));
  return 0;
}

int cuEventCreate(void **Event, unsigned) {
  *Event = std::malloc(1);
  return 0;
}

int cuEventElapsedTime_v2(float *Ms, void *, void *) {
  *Ms = 1.5f;
  return 0;
}

int cuStreamIsCapturing(void *, int *Status) {
  *Status = 0;
  return 0;
}

int cuGetErrorName(int Error, const char **Name) {
  *Name = Error == 200 ? "CUDA_ERROR_INVALID_IMAGE"
          : Error == 1 ? "CUDA_ERROR_INVALID_VALUE"
                       : "CUDA_ERROR_UNKNOWN";
  return 0;
}

#define FAKE_SUCCESS(Name)                                                     \
  int Name(...) { return 0; }
FAKE_SUCCESS(cuCtxSetCurrent)
FAKE_SUCCESS(cuMemGetInfo_v2)
FAKE_SUCCESS(cuMemAllocAsync)
FAKE_SUCCESS(cuMemFreeAsync)
FAKE_SUCCESS(cuDeviceGetName)
FAKE_SUCCESS(cuDeviceTotalMem_v2)
FAKE_SUCCESS(cuMemGetAllocationGranularity)
FAKE_SUCCESS(cuMemAddressReserve)
FAKE_SUCCESS(cuMemAddressFree)
FAKE_SUCCESS(cuMemCreate)
FAKE_SUCCESS(cuMemRelease)
FAKE_SUCCESS(cuMemMap)
FAKE_SUCCESS(cuMemUnmap)
FAKE_SUCCESS(cuMemSetAccess)
FAKE_SUCCESS(cuMemAlloc_v2)
FAKE_SUCCESS(cuMemFree_v2)
FAKE_SUCCESS(cuMemAllocHost_v2)
FAKE_SUCCESS(cuMemcpyDtoHAsync_v2)
FAKE_SUCCESS(cuMemcpyHtoDAsync_v2)
FAKE_SUCCESS(cuMemsetD32Async)
FAKE_SUCCESS(cuStreamCreate)
FAKE_SUCCESS(cuStreamSynchronize)
FAKE_SUCCESS(cuEventRecord)
FAKE_SUCCESS(cuEventSynchronize)
FAKE_SUCCESS(cuEventQuery)
FAKE_SUCCESS(cuFuncGetModule)
FAKE_SUCCESS(cuPointerGetAttribute)
FAKE_SUCCESS(cuCtxSynchronize)
FAKE_SUCCESS(cuStreamGetFlags)
FAKE_SUCCESS(cuFuncGetName)
FAKE_SUCCESS(cuKernelGetFunction)
FAKE_SUCCESS(cuLibraryGetModule)
FAKE_SUCCESS(cuModuleUnload)

} // extern "C"
