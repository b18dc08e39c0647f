// A CUDA runtime program as nvcc builds it: kernels launched with <<<>>>,
// no mneme-cc anywhere.  Prints a checksum of its results.
#include <cstdint>
#include <cstdio>
#include <vector>

__global__ void scale_add(float *y, const float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = a * x[i] + y[i] * 0.5f;
}

template <typename T> __global__ void accumulate(T *out, const T *in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] += in[i] * in[i];
}
template __global__ void accumulate<double>(double *, const double *, int);

static uint64_t fnv(const void *data, size_t bytes, uint64_t h = 1469598103934665603ull) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < bytes; ++i)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

int main() {
  const int n = 1 << 20;
  std::vector<float> x(n), y(n);
  std::vector<double> d(n);
  for (int i = 0; i < n; ++i) {
    x[i] = (i % 1000) * 0.001f - 0.3f;
    y[i] = (i % 77) * 0.01f;
    d[i] = (i % 313) * 0.5;
  }
  float *dx, *dy;
  double *dd, *dout;
  cudaMalloc(&dx, n * sizeof(float));
  cudaMalloc(&dy, n * sizeof(float));
  cudaMalloc(&dd, n * sizeof(double));
  cudaMalloc(&dout, n * sizeof(double));
  cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dd, d.data(), n * sizeof(double), cudaMemcpyHostToDevice);
  cudaMemset(dout, 0, n * sizeof(double));
  for (int step = 0; step < 3; ++step)
    scale_add<<<n / 256, 256>>>(dy, dx, 1.5f + step, n);
  accumulate<double><<<n / 128, 128>>>(dout, dd, n);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(e));
    return 1;
  }
  cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(d.data(), dout, n * sizeof(double), cudaMemcpyDeviceToHost);
  std::printf("checksum %016llx %016llx\n", (unsigned long long)fnv(y.data(), n * 4),
              (unsigned long long)fnv(d.data(), n * 8));
  return 0;
}
