// Device-side C++ that nvcc's device runtime and headers carry and clang's do
// not by themselves: new and delete without <new>, a class with a pure
// virtual function (its vtable names __cxa_pure_virtual), nan().
#include <cmath>
#include <cstdio>

struct Shape {
  __device__ virtual float area() const = 0;
  __device__ virtual ~Shape() {}
};

struct Square : Shape {
  float side;
  __device__ explicit Square(float s) : side(s) {}
  __device__ float area() const override { return side * side; }
};

struct Rect : Shape {
  float w, h;
  __device__ Rect(float a, float b) : w(a), h(b) {}
  __device__ float area() const override { return w * h; }
};

__global__ void areas(int n, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  Shape *s = i % 2 ? static_cast<Shape *>(new Square(float(i % 7))) : new Rect(float(i % 5), 2.0f);
  out[i] = s->area() + (isnan(::nan("")) ? 1.0f : 0.0f);
  delete s;
}

int main() {
  const int n = 1000;
  float *d;
  cudaMalloc(&d, n * sizeof(float));
  areas<<<(n + 127) / 128, 128>>>(n, d);
  float h[n];
  cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
  double sum = 0;
  for (float v : h)
    sum += v;
  std::printf("shapes n=%d sum=%.1f %s\n", n, sum, cudaGetErrorString(cudaGetLastError()));
  return 0;
}
