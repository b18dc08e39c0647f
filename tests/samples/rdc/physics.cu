// The device library (libphysics.a): functions and variables that kernels
// in other translation units call and read.
#include "particles.cuh"

__device__ float g_gravity = 2.0f;
__device__ int g_bounces = 0;

__device__ float drag(float velocity) { return velocity * 0.5f; }
