// The CPU backend's batch normalization (oneDNN's primitive, backends/cpu/dnnl_conv.h) and layer
// normalization (loops of our own, a row per task).
#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_backend_impl.h"
#include "backends/kernel_math.h"

namespace crossover::cpu {
namespace {

// ---- layer normalization, one row of n features (the model's rows are independent) ----
// Sums in 8 interleaved partial sums, added pairwise at the end: the compiler vectorises the
// loop without reassociating anything, and the order depends on n alone.
constexpr int64_t kLanes = 8;
template <class F>
inline float lane_sum(int64_t n, F&& term) {
  float acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) acc[l] += term(j + l);
  for (int64_t l = 0; j < n; ++j, ++l) acc[l] += term(j);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// The row's mean, then its biased variance from the mean (two passes), then y in Keras 3's
// order: inv = gamma * rstd, y = x * inv + (beta - mean * inv).
void layernorm_row_forward(const float* __restrict x, const float* __restrict gamma,
                           const float* __restrict beta, float* __restrict y, int64_t n,
                           float epsilon, float& mean, float& rstd) {
  const float count = static_cast<float>(n);
  const float mu = lane_sum(n, [&](int64_t j) { return x[j]; }) / count;
  const float var = lane_sum(n, [&](int64_t j) { return (x[j] - mu) * (x[j] - mu); }) / count;
  const float rs = 1.0f / std::sqrt(var + epsilon);
  mean = mu, rstd = rs;
  for (int64_t j = 0; j < n; ++j) {
    const float inv = (gamma ? gamma[j] : 1.0f) * rs;
    y[j] = x[j] * inv + ((beta ? beta[j] : 0.0f) - mu * inv);
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma, xhat = (x - mean) * rstd.
void layernorm_row_backward(const float* __restrict x, const float* __restrict dy,
                            const float* __restrict gamma, float mu, float rs, float* __restrict dx,
                            int64_t n) {
  const float count = static_cast<float>(n);
  auto g = [&](int64_t j) { return gamma ? dy[j] * gamma[j] : dy[j]; };
  const float mean_g = lane_sum(n, g) / count;
  const float mean_gx = lane_sum(n, [&](int64_t j) { return g(j) * ((x[j] - mu) * rs); }) / count;
  for (int64_t j = 0; j < n; ++j) dx[j] = rs * (g(j) - mean_g - (x[j] - mu) * rs * mean_gx);
}

// dgamma += dy * xhat, dbeta += dy over columns [c0, c1) of one row (vectorised across them).
void layernorm_row_params(const float* __restrict x, const float* __restrict dy, float mu, float rs,
                          float* __restrict dgamma, float* __restrict dbeta, int64_t c0,
                          int64_t c1) {
  for (int64_t j = c0; j < c1; ++j) {
    dgamma[j] += dy[j] * ((x[j] - mu) * rs);
    dbeta[j] += dy[j];
  }
}

}  // namespace

// Batch normalization: oneDNN's primitive (backends/cpu/dnnl_conv.h); the moving statistics
// update is C multiply-adds.
bool CpuBackend::has_batch_norm() const { return true; }
void CpuBackend::batchnorm_prepare(const BatchNormShape& s, int64_t m) {
  conv_.batchnorm_prepare(s, m);
}
void CpuBackend::batchnorm_forward_training(const BatchNormShape& s, const float* x,
                                            const float* gamma, const float* beta, float* y,
                                            float* mean, float* variance, int64_t m) {
  conv_.batchnorm_forward_training(s, x, gamma, beta, y, mean, variance, m);
}
void CpuBackend::batchnorm_forward_inference(const BatchNormShape& s, const float* x,
                                             const float* gamma, const float* beta,
                                             const float* mean, const float* variance, float* y,
                                             int64_t m) {
  conv_.batchnorm_forward_inference(s, x, gamma, beta, mean, variance, y, m);
}
void CpuBackend::batchnorm_backward(const BatchNormShape& s, const float* x, const float* dy,
                                    const float* gamma, const float* mean, const float* variance,
                                    float* dx, float* dgamma, float* dbeta, int64_t m) {
  conv_.batchnorm_backward(s, x, dy, gamma, mean, variance, dx, dgamma, dbeta, m);
}
void CpuBackend::batchnorm_update_moving(const BatchNormShape& s, const float* mean,
                                         const float* variance, float* moving_mean,
                                         float* moving_variance, double momentum) {
  batchnorm_moving_update(s.channels, mean, variance, moving_mean, moving_variance, momentum);
}

// Layer normalization: rows in parallel for y and dx (each row's sums on one thread); dgamma
// and dbeta in parallel over blocks of columns, each summed over the rows in row order, so the
// gradients are the same at any thread count and need no scratch.
void CpuBackend::layernorm_forward(const float* x, const float* gamma, const float* beta, float* y,
                                   float* mean, float* rstd, int64_t rows, int64_t n,
                                   float epsilon) {
  parallel_rows(rows, n, [&](int64_t r) {
    float mu = 0.0f, rs = 0.0f;
    layernorm_row_forward(x + r * n, gamma, beta, y + r * n, n, epsilon, mu, rs);
    if (mean) mean[r] = mu;
    if (rstd) rstd[r] = rs;
  });
}
void CpuBackend::layernorm_backward(const float* x, const float* dy, const float* gamma,
                                    const float* mean, const float* rstd, float* dx, float* dgamma,
                                    float* dbeta, int64_t rows, int64_t n) {
  if (dgamma || dbeta) {
    constexpr int64_t kBlock = 64;  // columns per task: a cache line of each of dgamma, dbeta
    // The one not asked for (scale=False or center=False) is summed into scratch.
    float* scratch = dgamma && dbeta ? nullptr : scratch_row(n);
    float* sg = dgamma ? dgamma : scratch;
    float* sb = dbeta ? dbeta : scratch;
    parallel_rows((n + kBlock - 1) / kBlock, rows * kBlock, [&](int64_t block) {
      const int64_t c0 = block * kBlock, c1 = std::min(n, c0 + kBlock);
      std::fill(sg + c0, sg + c1, 0.0f);
      std::fill(sb + c0, sb + c1, 0.0f);
      for (int64_t r = 0; r < rows; ++r)
        layernorm_row_params(x + r * n, dy + r * n, mean[r], rstd[r], sg, sb, c0, c1);
    });
  }
  parallel_rows(rows, n, [&](int64_t r) {
    layernorm_row_backward(x + r * n, dy + r * n, gamma, mean[r], rstd[r], dx + r * n, n);
  });
}

}  // namespace crossover::cpu
