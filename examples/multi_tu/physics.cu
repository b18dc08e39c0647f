// The second translation unit of the multi_tu example.
__device__ int g_steps;

__global__ void integrate(float *pos, const float *vel, float dt, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    pos[i] += vel[i] * dt;
  if (i == 0)
    ++g_steps;
}

void physics_step(float *pos, const float *vel, float dt, int n) {
  integrate<<<(n + 255) / 256, 256>>>(pos, vel, dt, n);
}
