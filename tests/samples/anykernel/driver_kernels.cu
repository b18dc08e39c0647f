// Kernels a program compiles ahead or at run time and loads through the
// driver API (cuModuleLoadData), as JIT-compiling libraries do.
extern "C" __global__ void saxpy(float *y, const float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = a * x[i] + y[i];
}

__device__ float bias[4] = {0.25f, -1.0f, 3.0f, 0.125f};

extern "C" __global__ void shift(float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = y[i] * 0.75f + bias[i & 3];
}
