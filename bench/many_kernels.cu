// A multi-kernel translation unit for the build-time benchmark: 8 kernel
// templates, each instantiated for 4 types (32 kernels), plus globals.
#include <cstdint>

__constant__ float c_weights[16];
__device__ unsigned long long d_counter;

#define KERNEL_FAMILY(NAME, BODY)                                              \
  template <typename T>                                                        \
  __global__ void NAME(const T *__restrict__ in, T *__restrict__ out, int n) { \
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;                 \
         i += gridDim.x * blockDim.x) {                                        \
      BODY                                                                     \
    }                                                                          \
  }                                                                            \
  template __global__ void NAME<float>(const float *, float *, int);           \
  template __global__ void NAME<double>(const double *, double *, int);        \
  template __global__ void NAME<int>(const int *, int *, int);                 \
  template __global__ void NAME<int64_t>(const int64_t *, int64_t *, int);

KERNEL_FAMILY(copy, out[i] = in[i];)
KERNEL_FAMILY(scale, out[i] = in[i] * static_cast<T>(c_weights[i & 15]);)
KERNEL_FAMILY(stencil3, {
  T l = i > 0 ? in[i - 1] : T(0);
  T r = i + 1 < n ? in[i + 1] : T(0);
  out[i] = l + in[i] + in[i] + r;
})
KERNEL_FAMILY(square_sum, {
  T acc = 0;
  for (int j = 0; j < 8; ++j)
    acc += in[(i + j) % n] * in[(i + j) % n];
  out[i] = acc;
})
KERNEL_FAMILY(count_positive, {
  if (in[i] > T(0))
    atomicAdd(&d_counter, 1ull);
  out[i] = in[i];
})
KERNEL_FAMILY(poly, {
  T x = in[i];
  out[i] = ((x * 3 + 2) * x + 7) * x + 1;
})
KERNEL_FAMILY(gather, out[i] = in[(i * 7919) % n];)
KERNEL_FAMILY(reverse, out[n - 1 - i] = in[i];)
