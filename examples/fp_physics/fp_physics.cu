// Floating-point physics through the math library: a float kernel over
// particles stored as structs of three floats (rsqrtf, sqrtf, expf, powf,
// sinf) and a double kernel (exp, log).  Every result depends on which
// multiply-adds are fused and how division, square roots and denormals are
// done, so replaying it bit for bit shows that replay computes what the
// application's build computed, whatever the build's floating-point flags.
//   usage: fp_physics [n=1048576] [steps=3]
#include "check.h"

#include <vector>

struct Vec3 {
  float x, y, z;
};

constexpr int kNeighbours = 8;
constexpr int kStride = 977;

__global__ void forces(const Vec3 *pos, const float *charge, Vec3 *force, int n, float soft) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  Vec3 p = pos[i];
  Vec3 f = {0.0f, 0.0f, 0.0f};
  for (int k = 1; k <= kNeighbours; ++k) {
    int j = (i + k * kStride) % n;
    Vec3 q = pos[j];
    float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
    float r2 = dx * dx + dy * dy + dz * dz + soft;
    float inv = rsqrtf(r2);
    float s = charge[i] * charge[j] * inv * inv * inv;
    float damp = expf(-0.5f * sqrtf(r2)) + powf(r2, -0.25f) * sinf(dx + dy);
    f.x += s * dx * damp;
    f.y += s * dy * damp;
    f.z += s * dz * damp;
  }
  force[i] = f;
}

__global__ void move(Vec3 *pos, const Vec3 *force, int n, float dt) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  pos[i].x += dt * force[i].x;
  pos[i].y += dt * force[i].y;
  pos[i].z += dt * force[i].z;
}

__global__ void energy(const double *x, double *e, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  double v = x[i];
  e[i] = exp(-v * v) * v + log(1.0 + v * v) * 0.5 - v * v * v / 3.0;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 1 << 20;
  int steps = argc > 2 ? std::atoi(argv[2]) : 3;
  if (n < 1024 || n > (1 << 26) || steps < 1 || steps > 1000) {
    std::fprintf(stderr, "usage: fp_physics [1024 <= n <= 2^26] [1 <= steps <= 1000]\n");
    return 2;
  }
  std::vector<Vec3> pos(n);
  std::vector<float> charge(n);
  std::vector<double> x(n);
  uint64_t state = 12345;
  auto next = [&] {  // 53-bit uniform in [0, 1)
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return double(state >> 11) / double(1ULL << 53);
  };
  for (int i = 0; i < n; ++i) {
    pos[i] = {float(10 * next()), float(10 * next()), float(10 * next())};
    charge[i] = float(next() - 0.5);
    x[i] = 4 * next() - 2;
  }
  Vec3 *d_pos, *d_force;
  float *d_charge;
  double *d_x, *d_e;
  CHECK(cudaMalloc(&d_pos, n * sizeof(Vec3)));
  CHECK(cudaMalloc(&d_force, n * sizeof(Vec3)));
  CHECK(cudaMalloc(&d_charge, n * sizeof(float)));
  CHECK(cudaMalloc(&d_x, n * sizeof(double)));
  CHECK(cudaMalloc(&d_e, n * sizeof(double)));
  CHECK(cudaMemcpy(d_pos, pos.data(), n * sizeof(Vec3), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_charge, charge.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_x, x.data(), n * sizeof(double), cudaMemcpyHostToDevice));
  int blocks = (n + 255) / 256;
  for (int s = 0; s < steps; ++s) {
    forces<<<blocks, 256>>>(d_pos, d_charge, d_force, n, 1e-3f);
    move<<<blocks, 256>>>(d_pos, d_force, n, 1e-4f);
  }
  energy<<<blocks, 256>>>(d_x, d_e, n);
  CHECK(cudaGetLastError());
  std::vector<Vec3> force(n);
  std::vector<double> e(n);
  CHECK(cudaMemcpy(force.data(), d_force, n * sizeof(Vec3), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(pos.data(), d_pos, n * sizeof(Vec3), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(e.data(), d_e, n * sizeof(double), cudaMemcpyDeviceToHost));
  std::printf("fp_physics n=%d steps=%d force=%016llx pos=%016llx energy=%016llx\n", n, steps,
              (unsigned long long)fnv1a(force.data(), n * sizeof(Vec3)),
              (unsigned long long)fnv1a(pos.data(), n * sizeof(Vec3)),
              (unsigned long long)fnv1a(e.data(), n * sizeof(double)));
  CHECK(cudaFree(d_pos));
  CHECK(cudaFree(d_force));
  CHECK(cudaFree(d_charge));
  CHECK(cudaFree(d_x));
  CHECK(cudaFree(d_e));
  return 0;
}
