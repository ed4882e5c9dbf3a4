// The CPU backend's element-wise layers: activations, merging (add, copy_columns), permuting each
// sample's axes, arithmetic with broadcasting and row sums.
#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_backend_impl.h"
#include "backends/kernel_math.h"

namespace crossover::cpu {
namespace {

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

void CpuBackend::activation_forward(ActivationKind act, float alpha, const float* x, float* y,
                                    int64_t m, int64_t n) {
  const int64_t total = m * n;
  switch (act) {
    case ActivationKind::linear:
      if (x != y) std::copy(x, x + total, y);
      return;
    case ActivationKind::relu:
      parallel_for(total, [&](int64_t i) { y[i] = std::max(x[i], 0.0f); });
      return;
    case ActivationKind::sigmoid:
      parallel_for(total, [&](int64_t i) { y[i] = sigmoid(x[i]); });
      return;
    case ActivationKind::tanh:
      parallel_for(total, [&](int64_t i) { y[i] = std::tanh(x[i]); });
      return;
    case ActivationKind::softmax:
      parallel_rows(m, n, [&](int64_t r) { softmax_row(x + r * n, y + r * n, n); });
      return;
    default:  // elu, selu, leaky_relu, gelu, softplus, swish, exponential
      parallel_for(total, [&](int64_t i) { y[i] = activation_value(act, x[i], alpha); });
      return;
  }
}

void CpuBackend::activation_backward(ActivationKind act, float alpha, const float* x,
                                     const float* y, const float* dy, float* dx, int64_t m,
                                     int64_t n) {
  const int64_t total = m * n;
  switch (act) {
    case ActivationKind::linear:
      if (dx != dy) std::copy(dy, dy + total, dx);
      return;
    case ActivationKind::relu:
      parallel_for(total, [&](int64_t i) { dx[i] = keep_if_positive(y[i], dy[i]); });
      return;
    case ActivationKind::sigmoid:
      parallel_for(total, [&](int64_t i) { dx[i] = dy[i] * y[i] * (1.0f - y[i]); });
      return;
    case ActivationKind::tanh:
      parallel_for(total, [&](int64_t i) { dx[i] = dy[i] * (1.0f - y[i] * y[i]); });
      return;
    case ActivationKind::softmax:
      // dx_j = y_j * (dy_j - sum_i dy_i y_i)
      parallel_rows(m, n, [&](int64_t r) {
        const float* yr = y + r * n;
        const float* dyr = dy + r * n;
        float* dxr = dx + r * n;
        float dot = 0.0f;
        for (int64_t j = 0; j < n; ++j) dot += dyr[j] * yr[j];
        for (int64_t j = 0; j < n; ++j) dxr[j] = yr[j] * (dyr[j] - dot);
      });
      return;
    case ActivationKind::gelu:
    case ActivationKind::swish:  // from the input x
      parallel_for(
          total, [&](int64_t i) { dx[i] = dy[i] * activation_derivative(act, x[i], y[i], alpha); });
      return;
    default:  // elu, selu, leaky_relu, softplus, exponential: from the output y
      parallel_for(
          total, [&](int64_t i) { dx[i] = dy[i] * activation_derivative(act, 0.0f, y[i], alpha); });
      return;
  }
}

// ---- merging layers and a graph's gradients ----
void CpuBackend::add(const float* a, const float* b, float* y, int64_t n) {
  parallel_chunks(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = a[i] + b[i];
  });
}
void CpuBackend::copy_columns(const float* src, int64_t src_cols, int64_t src_col, float* dst,
                              int64_t dst_cols, int64_t dst_col, int64_t rows, int64_t cols) {
  parallel_chunks_above(rows * cols, kParallelThreshold, rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      std::copy_n(src + r * src_cols + src_col, cols, dst + r * dst_cols + dst_col);
  });
}

// ---- permuting each sample's axes: one sample per task, its output in order (an odometer
// over y's outer axes, the last axis a strided run of x) ----
void CpuBackend::permute(const PermuteShape& s, const float* x, float* y, int64_t m) {
  const int rank = s.rank;
  const int64_t values = permute_values(s);
  if (rank == 0 || values == 0) return;
  // x's strides, then y's axis i as a dimension and a stride into x.
  int64_t in_stride[PermuteShape::kMaxRank], dim[PermuteShape::kMaxRank],
      stride[PermuteShape::kMaxRank];
  int64_t step = 1;
  for (int a = rank; a-- > 0;) in_stride[a] = step, step *= s.in[a];
  for (int i = 0; i < rank; ++i) dim[i] = s.in[s.perm[i]], stride[i] = in_stride[s.perm[i]];
  const int64_t inner = dim[rank - 1], inner_stride = stride[rank - 1];
  parallel_rows(m, values, [&](int64_t n) {
    const float* in = x + n * values;
    float* out = y + n * values;
    int64_t at[PermuteShape::kMaxRank] = {};
    int64_t offset = 0;  // into the sample of x, of y's position (at, 0)
    for (int64_t done = 0; done < values; done += inner) {
      for (int64_t j = 0; j < inner; ++j) out[done + j] = in[offset + j * inner_stride];
      for (int i = rank - 2; i >= 0; --i) {  // the next position of the outer axes
        offset += stride[i];
        if (++at[i] < dim[i]) break;
        offset -= stride[i] * dim[i];
        at[i] = 0;
      }
    }
  });
}

// ---- element-wise arithmetic with broadcasting, row sums ----
void CpuBackend::binary_forward(BinaryOp op, const BinaryShape& s, const float* a, const float* b,
                                float* y) {
  const int64_t cols = s.cols;
  parallel_rows(s.rows, cols, [&](int64_t r) {
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = binary_value(op, operand_at(a, s.a, s.a_value, r, c, cols),
                                     operand_at(b, s.b, s.b_value, r, c, cols));
  });
}
void CpuBackend::binary_backward(BinaryOp op, const BinaryShape& s, const float* a, const float* b,
                                 const float* dy, float* da, float* db) {
  const int64_t rows = s.rows, cols = s.cols;
  auto share = [&](int64_t r, int64_t c, bool of_a) {
    const BinaryGrad g =
        binary_gradient(op, operand_at(a, s.a, s.a_value, r, c, cols),
                        operand_at(b, s.b, s.b_value, r, c, cols), dy[r * cols + c]);
    return of_a ? g.a : g.b;
  };
  // Each operand's gradient, summed in float32 in row order over the axes it was broadcast
  // along (per row for a column, per column for a row, everything for a scalar).
  auto gradient = [&](float* o, Broadcast how, bool first) {
    if (!o) return;
    switch (how) {
      case Broadcast::full:
        parallel_rows(rows, cols, [&](int64_t r) {
          for (int64_t c = 0; c < cols; ++c) o[r * cols + c] = share(r, c, first);
        });
        break;
      case Broadcast::column:
        parallel_rows(rows, cols, [&](int64_t r) {
          float sum = 0.0f;
          for (int64_t c = 0; c < cols; ++c) sum += share(r, c, first);
          o[r] = sum;
        });
        break;
      case Broadcast::row:
        std::fill_n(o, cols, 0.0f);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) o[c] += share(r, c, first);
        break;
      case Broadcast::scalar: {
        float sum = 0.0f;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) sum += share(r, c, first);
        o[0] = sum;
        break;
      }
    }
  };
  gradient(da, s.a, true);
  gradient(db, s.b, false);
}
void CpuBackend::row_sum(const float* x, float* y, int64_t rows, int64_t cols, float scale) {
  parallel_rows(rows, cols, [&](int64_t r) {
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) sum += x[r * cols + c];
    y[r] = sum * scale;
  });
}

}  // namespace crossover::cpu
