// Shared declarations of the relocatable-device-code sample: the device
// library (physics.cu) defines these; the kernels in other files use them.
#pragma once

extern __device__ float g_gravity;      // defined in physics.cu
__device__ float drag(float velocity);  // defined in physics.cu
extern __device__ int g_bounces;         // counted by the kernels

// Defined in integrate.cu: launches its kernel, integrate().
void launch_integrate(float *position, float *velocity, int n, float dt, int blocks,
                      int threads);
