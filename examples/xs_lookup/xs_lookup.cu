// The innermost loop of Monte-Carlo neutron transport: macroscopic
// cross-section lookups.  Each lookup draws a particle energy and a material
// from a counter-based hash of its index (no generator state in memory),
// then, for every nuclide in that material, binary-searches each of the
// nuclide's energy grids, interpolates five cross sections (total, elastic,
// absorption, fission, nu-fission) and adds them weighted by the nuclide's
// density, in double precision.  Chains of dependent, scattered loads and
// many live doubles (each nuclide is interpolated on a cold and a hot grid,
// then between the two) make it the suite's latency-bound, register-heavy
// kernel; the lookup count, grid length and material layout are scalar
// arguments that bound its loops and feed its address arithmetic.  Each
// lookup is summed by one thread in a fixed order: the same bits every run.
//   usage: xs_lookup [lookups=1048576] [nuclides=64] [gridpoints=10000]
#include "check.h"

#include <vector>

constexpr int kThreads = 256;
constexpr int kMaterials = 10;
constexpr int kMaxBlocks = 16384;

// One energy point of a nuclide's grid and the cross sections there (barns).
struct GridPoint {
  double energy, total, elastic, absorption, fission, nu_fission;
};

// A bijective 64-bit mix (a splitmix-style finaliser): hash(counter) is the
// random stream, so lookup i draws the same numbers whatever thread runs it.
__host__ __device__ inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

__device__ inline double uniform(uint64_t key) { return double(mix64(key) >> 11) * 0x1.0p-53; }

// The five cross sections of one nuclide at one temperature, interpolated
// linearly in energy on that temperature's grid of n_gridpoints points.
__device__ inline void interpolate(const GridPoint *grid, int n_gridpoints, double energy,
                                   double xs[5]) {
  // lo: the last grid point at or below the energy (0 below the grid).
  int lo = 0, hi = n_gridpoints - 1;
  while (hi - lo > 1) {
    int mid = lo + (hi - lo) / 2;
    if (grid[mid].energy > energy)
      hi = mid;
    else
      lo = mid;
  }
  GridPoint a = grid[lo], b = grid[lo + 1];
  double f = (b.energy - energy) / (b.energy - a.energy);
  xs[0] = b.total - f * (b.total - a.total);
  xs[1] = b.elastic - f * (b.elastic - a.elastic);
  xs[2] = b.absorption - f * (b.absorption - a.absorption);
  xs[3] = b.fission - f * (b.fission - a.fission);
  xs[4] = b.nu_fission - f * (b.nu_fission - a.nu_fission);
}

// macro_xs[5 i + c] = the sum over the material's nuclides of density times
// cross section c at lookup i's energy and temperature.  Every nuclide has
// a grid at a cold and at a hot temperature (grids[nuclide][2][gridpoint],
// each with its own energies); a lookup interpolates on both and then
// linearly between them.  Material m lists mat_count[m] nuclides at
// mat_nuclide/mat_density[m * max_per_material ...].
__global__ void xs_lookup(const GridPoint *grids, int n_gridpoints, const int *mat_count,
                          const int *mat_nuclide, const double *mat_density, int max_per_material,
                          const double *mat_cdf, int n_materials, long n_lookups, uint64_t seed,
                          double *macro_xs) {
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n_lookups;
       i += long(gridDim.x) * blockDim.x) {
    uint64_t key = mix64(seed ^ uint64_t(i));
    double energy = uniform(key);
    double pick = uniform(key + 1);
    double hot = uniform(key + 2); // where the temperature lies between the two grids
    int mat = 0;
    while (mat < n_materials - 1 && pick >= mat_cdf[mat])
      ++mat;
    double macro[5] = {0.0, 0.0, 0.0, 0.0, 0.0};
    int count = mat_count[mat];
    for (int k = 0; k < count; ++k) {
      int nuclide = mat_nuclide[mat * max_per_material + k];
      double density = mat_density[mat * max_per_material + k];
      const GridPoint *cold_grid = grids + 2 * long(nuclide) * n_gridpoints;
      double cold[5], warm[5];
      interpolate(cold_grid, n_gridpoints, energy, cold);
      interpolate(cold_grid + n_gridpoints, n_gridpoints, energy, warm);
      for (int c = 0; c < 5; ++c)
        macro[c] += density * (cold[c] + hot * (warm[c] - cold[c]));
    }
    double *out = macro_xs + 5 * i;
    for (int c = 0; c < 5; ++c)
      out[c] = macro[c];
  }
}

int main(int argc, char **argv) {
  long lookups = argc > 1 ? std::atol(argv[1]) : 1L << 20;
  int nuclides = argc > 2 ? std::atoi(argv[2]) : 64;
  int gridpoints = argc > 3 ? std::atoi(argv[3]) : 10000;
  if (lookups < 1 || lookups > (1L << 24) || nuclides < 1 || nuclides > 1024 || gridpoints < 2 ||
      gridpoints > (1 << 20) || long(nuclides) * gridpoints > (1L << 23)) {
    std::fprintf(stderr, "usage: xs_lookup [1 <= lookups <= 2^24] [1 <= nuclides <= 1024] "
                         "[2 <= gridpoints <= 2^20] (nuclides * gridpoints <= 2^23)\n");
    return 2;
  }
  uint64_t state = 99;
  auto next = [&] { // 53-bit uniform in [0, 1)
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return double(state >> 11) / double(1ULL << 53);
  };
  // Per nuclide and temperature: strictly increasing energies in (0, 1)
  // (one in each slot of width 1/gridpoints) and positive cross sections;
  // every fourth nuclide is fissile.
  const long points = 2L * nuclides * gridpoints;
  std::vector<GridPoint> grids(points);
  for (int u = 0; u < 2 * nuclides; ++u) {
    double scale = 1.0 + 9.0 * next();
    bool fissile = u / 2 % 4 == 0;
    for (int g = 0; g < gridpoints; ++g) {
      GridPoint &q = grids[long(u) * gridpoints + g];
      q.energy = (g + 0.05 + 0.9 * next()) / gridpoints;
      q.elastic = scale * (0.5 + next());
      q.absorption = scale * 0.2 * next();
      q.fission = fissile ? scale * 0.3 * next() : 0.0;
      q.nu_fission = 2.43 * q.fission;
      q.total = q.elastic + q.absorption + q.fission;
    }
  }
  // Materials: the fuel holds half of the nuclides (at most 32), the others
  // between 4 and 20; each picks distinct nuclides.  The fuel is drawn with
  // probability 0.3, the rest evenly.
  const int max_per_material = nuclides < 32 ? nuclides : 32;
  std::vector<int> mat_count(kMaterials), mat_nuclide(kMaterials * max_per_material, 0);
  std::vector<double> mat_density(kMaterials * max_per_material, 0.0), mat_cdf(kMaterials);
  std::vector<int> order(nuclides);
  for (int m = 0; m < kMaterials; ++m) {
    int want = m == 0 ? (nuclides + 1) / 2 : 4 + (m * 7) % 17;
    if (want > max_per_material)
      want = max_per_material;
    mat_count[m] = want;
    for (int u = 0; u < nuclides; ++u)
      order[u] = u;
    for (int k = 0; k < want; ++k) { // a partial Fisher-Yates shuffle
      int j = k + int(next() * (nuclides - k));
      std::swap(order[k], order[j]);
      mat_nuclide[m * max_per_material + k] = order[k];
      mat_density[m * max_per_material + k] = 1e-3 + 0.1 * next();
    }
    mat_cdf[m] = 0.3 + 0.7 * m / (kMaterials - 1);
  }
  mat_cdf[kMaterials - 1] = 1.0;

  GridPoint *d_grids;
  int *d_count, *d_nuclide;
  double *d_density, *d_cdf, *d_xs;
  CHECK(cudaMalloc(&d_grids, points * sizeof(GridPoint)));
  CHECK(cudaMalloc(&d_count, kMaterials * sizeof(int)));
  CHECK(cudaMalloc(&d_nuclide, kMaterials * max_per_material * sizeof(int)));
  CHECK(cudaMalloc(&d_density, kMaterials * max_per_material * sizeof(double)));
  CHECK(cudaMalloc(&d_cdf, kMaterials * sizeof(double)));
  CHECK(cudaMalloc(&d_xs, 5 * lookups * sizeof(double)));
  CHECK(cudaMemcpy(d_grids, grids.data(), points * sizeof(GridPoint), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_count, mat_count.data(), kMaterials * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_nuclide, mat_nuclide.data(), kMaterials * max_per_material * sizeof(int),
                   cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_density, mat_density.data(), kMaterials * max_per_material * sizeof(double),
                   cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_cdf, mat_cdf.data(), kMaterials * sizeof(double), cudaMemcpyHostToDevice));
  long wanted = (lookups + kThreads - 1) / kThreads;
  int blocks = int(wanted < kMaxBlocks ? wanted : kMaxBlocks);
  xs_lookup<<<blocks, kThreads>>>(d_grids, gridpoints, d_count, d_nuclide, d_density,
                                  max_per_material, d_cdf, kMaterials, lookups,
                                  0x5eed5eed12345678ULL, d_xs);
  CHECK(cudaGetLastError());
  std::vector<double> xs(5 * lookups);
  CHECK(cudaMemcpy(xs.data(), d_xs, 5 * lookups * sizeof(double), cudaMemcpyDeviceToHost));
  double mean_total = 0.0;
  for (long i = 0; i < lookups; ++i)
    mean_total += xs[5 * i];
  std::printf("xs_lookup lookups=%ld nuclides=%d gridpoints=%d mean_total=%.9e checksum=%016llx\n",
              lookups, nuclides, gridpoints, mean_total / lookups,
              (unsigned long long)fnv1a(xs.data(), 5 * lookups * sizeof(double)));
  for (void *p : {(void *)d_grids, (void *)d_count, (void *)d_nuclide, (void *)d_density,
                  (void *)d_cdf, (void *)d_xs})
    CHECK(cudaFree(p));
  return 0;
}
