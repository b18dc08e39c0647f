// Conjugate gradients on a generated sparse SPD matrix: a 7-point
// variable-coefficient diffusion operator on an N^3 grid, stored as CSR.
// Grid-stride SpMV, a deterministic two-stage dot product, axpy and xpay.
// At the default N=200 the device holds about 1 GiB.
//   usage: cg [N=200] [max_iterations=2000]
#include "check.h"

#include <cmath>
#include <vector>

constexpr int kBlocks = 1024, kThreads = 256;

__global__ void spmv(int n, const int *rowptr, const int *col, const double *val,
                     const double *x, double *y) {
  for (int row = blockIdx.x * blockDim.x + threadIdx.x; row < n; row += gridDim.x * blockDim.x) {
    double sum = 0.0;
    for (int k = rowptr[row]; k < rowptr[row + 1]; ++k)
      sum += val[k] * x[col[k]];
    y[row] = sum;
  }
}

// The block's sum of v, reduced in a fixed order (deterministic); valid in
// thread 0.
__device__ double block_sum(double v) {
  __shared__ double s[kThreads];
  s[threadIdx.x] = v;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      s[threadIdx.x] += s[threadIdx.x + half];
    __syncthreads();
  }
  return s[0];
}

// Per-block partial sums of a.b.
__global__ void dot_partial(int n, const double *a, const double *b, double *partial) {
  double sum = 0.0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    sum += a[i] * b[i];
  sum = block_sum(sum);
  if (threadIdx.x == 0)
    partial[blockIdx.x] = sum;
}

__global__ void sum_partials(int m, const double *partial, double *result) {
  double sum = 0.0;
  for (int i = threadIdx.x; i < m; i += blockDim.x)
    sum += partial[i];
  sum = block_sum(sum);
  if (threadIdx.x == 0)
    *result = sum;
}

__global__ void axpy(int n, double alpha, const double *x, double *y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] += alpha * x[i];
}

__global__ void xpay(int n, double beta, const double *x, double *y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = x[i] + beta * y[i];
}

// Symmetric coupling between grid points a and b (exact binary fractions).
static double coupling(long a, long b) { return 1.0 + ((a + b) % 7) * 0.125; }

static double dot(int n, const double *a, const double *b, double *partial, double *result) {
  dot_partial<<<kBlocks, kThreads>>>(n, a, b, partial);
  sum_partials<<<1, kThreads>>>(kBlocks, partial, result);
  double h;
  CHECK(cudaMemcpy(&h, result, sizeof h, cudaMemcpyDeviceToHost));
  return h;
}

int main(int argc, char **argv) {
  const int N = argc > 1 ? std::atoi(argv[1]) : 200;
  const int max_iterations = argc > 2 ? std::atoi(argv[2]) : 2000;
  if (N < 2 || N > 400 || max_iterations < 1) {
    std::fprintf(stderr, "usage: cg [2 <= N <= 400] [max_iterations >= 1]\n");
    return 2;
  }
  const int n = N * N * N;
  std::vector<int> rowptr(n + 1), col;
  std::vector<double> val;
  col.reserve(7L * n);
  val.reserve(7L * n);
  // Neighbours in column order: -z, -y, -x, the point itself, +x, +y, +z.
  const int di[7] = {0, 0, -1, 0, 1, 0, 0}, dj[7] = {0, -1, 0, 0, 0, 1, 0},
            dk[7] = {-1, 0, 0, 0, 0, 0, 1};
  for (int k = 0; k < N; ++k)
    for (int j = 0; j < N; ++j)
      for (int i = 0; i < N; ++i) {
        long row = (long(k) * N + j) * N + i;
        rowptr[row] = static_cast<int>(col.size());
        double diag = 0.0; // sum of the couplings; a missing neighbour is a boundary (1.0)
        for (int d = 0; d < 7; ++d) {
          int ii = i + di[d], jj = j + dj[d], kk = k + dk[d];
          if (d == 3)
            continue;
          bool inside = ii >= 0 && jj >= 0 && kk >= 0 && ii < N && jj < N && kk < N;
          diag += inside ? coupling(row, (long(kk) * N + jj) * N + ii) : 1.0;
        }
        for (int d = 0; d < 7; ++d) {
          int ii = i + di[d], jj = j + dj[d], kk = k + dk[d];
          if (ii < 0 || jj < 0 || kk < 0 || ii >= N || jj >= N || kk >= N)
            continue;
          long nb = (long(kk) * N + jj) * N + ii;
          col.push_back(static_cast<int>(nb));
          val.push_back(d == 3 ? diag : -coupling(row, nb));
        }
      }
  rowptr[n] = static_cast<int>(col.size());
  const long nnz = static_cast<long>(col.size());

  int *d_rowptr, *d_col;
  double *d_val, *d_x, *d_r, *d_p, *d_ap, *d_partial, *d_result;
  CHECK(cudaMalloc(&d_rowptr, (n + 1) * sizeof(int)));
  CHECK(cudaMalloc(&d_col, nnz * sizeof(int)));
  CHECK(cudaMalloc(&d_val, nnz * sizeof(double)));
  for (double **v : {&d_x, &d_r, &d_p, &d_ap})
    CHECK(cudaMalloc(v, n * sizeof(double)));
  CHECK(cudaMalloc(&d_partial, kBlocks * sizeof(double)));
  CHECK(cudaMalloc(&d_result, sizeof(double)));
  CHECK(cudaMemcpy(d_rowptr, rowptr.data(), (n + 1) * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_col, col.data(), nnz * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_val, val.data(), nnz * sizeof(double), cudaMemcpyHostToDevice));

  // x = 0, r = p = b = 1.
  std::vector<double> ones(n, 1.0);
  CHECK(cudaMemset(d_x, 0, n * sizeof(double)));
  CHECK(cudaMemcpy(d_r, ones.data(), n * sizeof(double), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_p, ones.data(), n * sizeof(double), cudaMemcpyHostToDevice));

  double rr = dot(n, d_r, d_r, d_partial, d_result);
  const double rr0 = rr;
  int it = 0;
  for (; it < max_iterations && std::sqrt(rr / rr0) > 1e-8; ++it) {
    spmv<<<kBlocks, kThreads>>>(n, d_rowptr, d_col, d_val, d_p, d_ap);
    double alpha = rr / dot(n, d_p, d_ap, d_partial, d_result);
    axpy<<<kBlocks, kThreads>>>(n, alpha, d_p, d_x);
    axpy<<<kBlocks, kThreads>>>(n, -alpha, d_ap, d_r);
    double rr_new = dot(n, d_r, d_r, d_partial, d_result);
    xpay<<<kBlocks, kThreads>>>(n, rr_new / rr, d_r, d_p);
    rr = rr_new;
  }
  CHECK(cudaGetLastError());
  std::vector<double> x(n);
  CHECK(cudaMemcpy(x.data(), d_x, n * sizeof(double), cudaMemcpyDeviceToHost));
  std::printf("cg N=%d n=%d nnz=%ld iterations=%d residual=%.3e checksum=%016llx\n", N, n, nnz,
              it, std::sqrt(rr / rr0), static_cast<unsigned long long>(fnv1a(x.data(), n * 8)));
  for (void *p : {(void *)d_rowptr, (void *)d_col, (void *)d_val, (void *)d_x, (void *)d_r,
                  (void *)d_p, (void *)d_ap, (void *)d_partial, (void *)d_result})
    CHECK(cudaFree(p));
  return 0;
}
