// The launch and allocation entry points the examples do not use:
// cudaLaunchCooperativeKernel, cudaLaunchKernelExC with a cluster
// dimension, cudaMallocAsync / cudaFreeAsync and cudaMallocPitch.
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

#define CHECK(call)                                                            \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      return 1;                                                                \
    }                                                                          \
  } while (0)

__global__ void scale(float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] *= a;
}

__global__ void fill_rows(float *m, size_t pitch, int width, int height) {
  int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
  if (c < width && r < height)
    reinterpret_cast<float *>(reinterpret_cast<char *>(m) + r * pitch)[c] = float(r * 1000 + c);
}

int main() {
  const int n = 4096;
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float *x;
  CHECK(cudaMallocAsync(&x, n * sizeof(float), stream));
  std::vector<float> h(n);
  for (int i = 0; i < n; ++i)
    h[i] = float(i % 100);
  CHECK(cudaMemcpyAsync(x, h.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream));

  float a = 2.0f;
  int count = n;
  void *args[] = {&x, &a, &count};
  CHECK(cudaLaunchCooperativeKernel((const void *)scale, dim3(n / 256), dim3(256), args, 0,
                                    stream));

  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(n / 256);
  config.blockDim = dim3(256);
  config.stream = stream;
  cudaLaunchAttribute cluster;
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = 2;
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = 1;
  float b = 0.5f;
  CHECK(cudaLaunchKernelEx(&config, scale, x, b, count));

  CHECK(cudaMemcpyAsync(h.data(), x, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
  CHECK(cudaFreeAsync(x, stream));
  CHECK(cudaStreamSynchronize(stream));
  double sum = 0;
  for (float v : h)
    sum += v;

  const int width = 100, height = 8;
  float *m;
  size_t pitch;
  CHECK(cudaMallocPitch(reinterpret_cast<void **>(&m), &pitch, width * sizeof(float), height));
  fill_rows<<<dim3(1, height), 128>>>(m, pitch, width, height);
  std::vector<float> rows(width * height);
  CHECK(cudaMemcpy2D(rows.data(), width * sizeof(float), m, pitch, width * sizeof(float), height,
                     cudaMemcpyDeviceToHost));
  double rsum = 0;
  for (float v : rows)
    rsum += v;
  CHECK(cudaFree(m));
  std::printf("launch_apis sum=%.1f rows=%.1f pitch_ok=%d\n", sum, rsum, int(pitch % 512 == 0));
  return 0;
}
