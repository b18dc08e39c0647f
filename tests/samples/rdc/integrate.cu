// A kernel that calls the device library: its IR alone only declares
// drag() and g_gravity.
#include "particles.cuh"

__global__ void integrate(float *position, float *velocity, int n, float dt) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float v = drag(velocity[i]) - g_gravity * dt;
  float x = position[i] + v * dt;
  if (x < 0.0f) {  // bounce off the floor
    x = -x;
    v = -v;
    atomicAdd(&g_bounces, 1);
  }
  position[i] = x;
  velocity[i] = v;
}

// The launch stays in the kernel's own file: clang 22's device link refuses
// a kernel that another file launches (docs/from-nvcc.md).
void launch_integrate(float *position, float *velocity, int n, float dt, int blocks, int threads) {
  integrate<<<blocks, threads>>>(position, velocity, n, dt);
}
