// All-pairs gravitational n-body: every step computes each body's
// acceleration from all the others, streaming the bodies through shared
// memory in tiles of blockDim.x (softened, rsqrtf), then a leapfrog
// kick-drift moves them.  The force kernel is the suite's compute-bound
// case: its inner loop runs over the tile, so the block size, unrolling,
// the register cap and the fast-math flags all move its time, while every
// sum is taken in a fixed order (the same bits on every run).
//   usage: nbody [n=65536] [steps=4]
#include "check.h"

#include <vector>

constexpr int kThreads = 256;

// acc[i] = sum over j of m_j (p_j - p_i) / (|p_j - p_i|^2 + soft2)^(3/2),
// with m_j in pos[j].w.  Bodies past n in the last tile are read as
// massless, so every thread runs the full tile loop.
__global__ void body_forces(const float4 *pos, float4 *acc, int n, float soft2) {
  extern __shared__ float4 tile[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float4 p = i < n ? pos[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float ax = 0.0f, ay = 0.0f, az = 0.0f;
  const int width = blockDim.x;
  for (int base = 0; base < n; base += width) {
    int j = base + threadIdx.x;
    tile[threadIdx.x] = j < n ? pos[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    __syncthreads();
    for (int k = 0; k < width; ++k) {
      float4 q = tile[k];
      float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
      float r2 = dx * dx + dy * dy + dz * dz + soft2;
      float inv = rsqrtf(r2);
      float s = q.w * inv * inv * inv;
      ax += s * dx;
      ay += s * dy;
      az += s * dz;
    }
    __syncthreads();
  }
  if (i < n)
    acc[i] = make_float4(ax, ay, az, 0.0f);
}

// Kick (v += a dt) then drift (x += v dt); the mass in pos.w is kept.
__global__ void leapfrog(float4 *pos, float4 *vel, const float4 *acc, int n, float dt) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float4 a = acc[i], v = vel[i], p = pos[i];
  v.x += a.x * dt;
  v.y += a.y * dt;
  v.z += a.z * dt;
  p.x += v.x * dt;
  p.y += v.y * dt;
  p.z += v.z * dt;
  vel[i] = v;
  pos[i] = p;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 65536;
  int steps = argc > 2 ? std::atoi(argv[2]) : 4;
  if (n < 2 || n > (1 << 20) || steps < 1 || steps > 1000) {
    std::fprintf(stderr, "usage: nbody [2 <= n <= 2^20] [1 <= steps <= 1000]\n");
    return 2;
  }
  // A uniform ball of equal masses (total mass 1), slowly rotating.
  std::vector<float4> pos(n), vel(n);
  uint64_t state = 2024;
  auto next = [&] { // 53-bit uniform in [0, 1)
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return double(state >> 11) / double(1ULL << 53);
  };
  for (int i = 0; i < n; ++i) {
    double x, y, z;
    do {
      x = 2 * next() - 1;
      y = 2 * next() - 1;
      z = 2 * next() - 1;
    } while (x * x + y * y + z * z > 1.0);
    pos[i] = make_float4(float(x), float(y), float(z), float(1.0 / n));
    vel[i] = make_float4(float(-0.3 * y + 0.01 * (next() - 0.5)),
                         float(0.3 * x + 0.01 * (next() - 0.5)), float(0.01 * (next() - 0.5)),
                         0.0f);
  }
  float4 *d_pos, *d_vel, *d_acc;
  CHECK(cudaMalloc(&d_pos, n * sizeof(float4)));
  CHECK(cudaMalloc(&d_vel, n * sizeof(float4)));
  CHECK(cudaMalloc(&d_acc, n * sizeof(float4)));
  CHECK(cudaMemcpy(d_pos, pos.data(), n * sizeof(float4), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_vel, vel.data(), n * sizeof(float4), cudaMemcpyHostToDevice));
  const float soft2 = 1e-4f, dt = 1e-3f;
  int blocks = (n + kThreads - 1) / kThreads;
  for (int s = 0; s < steps; ++s) {
    body_forces<<<blocks, kThreads, kThreads * sizeof(float4)>>>(d_pos, d_acc, n, soft2);
    leapfrog<<<blocks, kThreads>>>(d_pos, d_vel, d_acc, n, dt);
  }
  CHECK(cudaGetLastError());
  std::vector<float4> acc(n);
  CHECK(cudaMemcpy(pos.data(), d_pos, n * sizeof(float4), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(vel.data(), d_vel, n * sizeof(float4), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(acc.data(), d_acc, n * sizeof(float4), cudaMemcpyDeviceToHost));
  std::printf("nbody n=%d steps=%d pos=%016llx vel=%016llx acc=%016llx\n", n, steps,
              (unsigned long long)fnv1a(pos.data(), n * sizeof(float4)),
              (unsigned long long)fnv1a(vel.data(), n * sizeof(float4)),
              (unsigned long long)fnv1a(acc.data(), n * sizeof(float4)));
  CHECK(cudaFree(d_pos));
  CHECK(cudaFree(d_vel));
  CHECK(cudaFree(d_acc));
  return 0;
}
