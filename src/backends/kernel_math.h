// The arithmetic every backend shares: the per-element optimizer updates (Keras's formulas), the
// learning-rate schedule, and a loss row. Written once, compiled as host code for the CPU and as
// device code for CUDA (CROSSOVER_HD), so the two devices cannot drift apart in semantics.
#pragma once

#include <cmath>
#include <cstdint>

#include "backends/backend.h"
#include "core/philox.h"  // CROSSOVER_HD

namespace crossover {

// Keras's regularizers (L1, L2, L1L2) at one value w (a weight, or an output under an activity
// regularizer), and an add_loss term's sum (linear), in float32 as Keras's: its share of the
// penalty, l1 |w| + l2 w^2 + linear w, and of its gradient, l1 sign(w) + 2 l2 w + linear
// (sign(0) = 0, as TensorFlow's).
CROSSOVER_HD float regularizer_penalty(float w, float l1, float l2, float linear) {
  return l1 * (w < 0.0f ? -w : w) + l2 * (w * w) + linear * w;
}
CROSSOVER_HD float regularizer_gradient(float w, float l1, float l2, float linear) {
  const float sign = w > 0.0f ? 1.0f : (w < 0.0f ? -1.0f : 0.0f);
  return l1 * sign + 2.0f * l2 * w + linear;
}

CROSSOVER_HD float scheduled_learning_rate(const LearningRateSchedule& s, int64_t step) {
  if (s.decay_steps <= 0 || s.decay_rate == 1.0f) return s.base;
  double p = static_cast<double>(step) / static_cast<double>(s.decay_steps);
  if (s.staircase) p = std::floor(p);
  return static_cast<float>(s.base * std::pow(static_cast<double>(s.decay_rate), p));
}

// The positions [start, end) along one axis (rows or columns) of the pooling window of output
// position `out` that lie inside the image: padding never counts (max ignores it, the average
// divides by the real elements only, TensorFlow's 'same').
struct PoolSpan {
  int64_t start, end;
  CROSSOVER_HD int64_t size() const { return end - start; }
};
CROSSOVER_HD PoolSpan pool_window(int64_t out, int64_t stride, int64_t pad, int64_t window,
                                  int64_t size) {
  const int64_t s = out * stride - pad;
  return {s < 0 ? 0 : s, s + window < size ? s + window : size};
}
CROSSOVER_HD PoolSpan pool_rows(const PoolShape& p, int64_t oh) {
  return pool_window(oh, p.stride_h, p.pad_top, p.window_h, p.in_h);
}
CROSSOVER_HD PoolSpan pool_cols(const PoolShape& p, int64_t ow) {
  return pool_window(ow, p.stride_w, p.pad_left, p.window_w, p.in_w);
}

// ---- element-wise arithmetic with broadcasting (binary_forward, binary_backward) ----
// Where y's element (r, c) reads an operand broadcast as `how`.
CROSSOVER_HD int64_t broadcast_index(Broadcast how, int64_t r, int64_t c, int64_t cols) {
  switch (how) {
    case Broadcast::full:
      return r * cols + c;
    case Broadcast::column:
      return r;
    case Broadcast::row:
      return c;
    case Broadcast::scalar:
      break;
  }
  return 0;
}
CROSSOVER_HD float binary_value(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::add:
      return a + b;
    case BinaryOp::subtract:
      return a - b;
    case BinaryOp::multiply:
      return a * b;
    case BinaryOp::divide:
      return a / b;
    case BinaryOp::maximum:
      return a >= b ? a : b;
    case BinaryOp::minimum:
      return a <= b ? a : b;
    case BinaryOp::average:
      return (a + b) / 2.0f;
  }
  return 0.0f;
}
// The two operands' shares of dy at (a, b), as TensorFlow's gradients give them (maximum:
// a's where a >= b; minimum: a's where a <= b; divide: -dy * (-a / b) / b for b).
struct BinaryGrad {
  float a, b;
};
CROSSOVER_HD BinaryGrad binary_gradient(BinaryOp op, float a, float b, float dy) {
  switch (op) {
    case BinaryOp::add:
      return {dy, dy};
    case BinaryOp::subtract:
      return {dy, -dy};
    case BinaryOp::multiply:
      return {dy * b, a * dy};
    case BinaryOp::divide:
      return {dy / b, dy * (-a / b / b)};
    case BinaryOp::maximum:
      return a >= b ? BinaryGrad{dy, 0.0f} : BinaryGrad{0.0f, dy};
    case BinaryOp::minimum:
      return a <= b ? BinaryGrad{dy, 0.0f} : BinaryGrad{0.0f, dy};
    case BinaryOp::average:
      return {dy / 2.0f, dy / 2.0f};
  }
  return {0.0f, 0.0f};
}
// Operand values at y's (r, c): the operand's, or the shape's constant for a null one.
CROSSOVER_HD float operand_at(const float* p, Broadcast how, float value, int64_t r, int64_t c,
                              int64_t cols) {
  return p ? p[broadcast_index(how, r, c, cols)] : value;
}

// Clip by global norm (Keras's global_clipnorm / torch's clip_grad_norm_): scale = min(1, c/norm).
CROSSOVER_HD float clipnorm_scale(float clipnorm, double sum_squares) {
  double norm = std::sqrt(sum_squares);
  return norm > clipnorm ? static_cast<float>(clipnorm / norm) : 1.0f;
}

// Keras's BatchNormalization moving statistics after a training batch, per channel c:
// moving = moving * momentum + batch * (1 - momentum), each product and the sum rounded to float32
// as Keras's ops are, with momentum and 1 - momentum (Python arithmetic, in double) each rounded to
// float32 once.
CROSSOVER_HD void batchnorm_moving_update(int64_t channels, const float* mean,
                                          const float* variance, float* moving_mean,
                                          float* moving_variance, double momentum) {
  const auto keep = static_cast<float>(momentum), take = static_cast<float>(1.0 - momentum);
  for (int64_t c = 0; c < channels; ++c) {
    const float old_mean = moving_mean[c] * keep, new_mean = mean[c] * take;
    moving_mean[c] = old_mean + new_mean;
    const float old_var = moving_variance[c] * keep, new_var = variance[c] * take;
    moving_variance[c] = old_var + new_var;
  }
}

// The optimizer's per-step constants (its unit's constants(), after the learning rate), with the
// value it carries between steps (counters.carried) as it stood before step t.
CROSSOVER_HD UpdateConstants update_constants(const OptimizerConfig& c, float lr, int64_t t,
                                              const StepCounters& counters) {
  UpdateConstants u{};
  u.lr = lr;
  switch (c.kind) {
#define CROSSOVER_CONSTANTS(kind, Unit)                               \
  case OptimizerKind::kind:                                           \
    optimizers::Unit::constants(c.args.kind, t, counters.carried, u); \
    break;
    CROSSOVER_OPTIMIZERS(CROSSOVER_CONSTANTS)
#undef CROSSOVER_CONSTANTS
  }
  return u;
}

// After step t: the value the optimizer carries into the next step.
CROSSOVER_HD void record_step(const OptimizerConfig& c, const UpdateConstants& u,
                              StepCounters& counters, int64_t t) {
  switch (c.kind) {
#define CROSSOVER_CARRY(kind, Unit)                               \
  case OptimizerKind::kind:                                       \
    optimizers::Unit::carry(c.args.kind, u, counters.carried, t); \
    break;
    CROSSOVER_OPTIMIZERS(CROSSOVER_CARRY)
#undef CROSSOVER_CARRY
  }
}

// Keras's clipnorm (base_optimizer._clip_by_norm), one parameter tensor at a time: g * clipnorm /
// max(norm, clipnorm), norm the tensor's L2 norm. The divisor max(norm, clipnorm), from the
// tensor's sum of squares.
CROSSOVER_HD float tensor_clip_divisor(float clipnorm, double sum_squares) {
  const auto norm = static_cast<float>(std::sqrt(sum_squares));
  return norm > clipnorm ? norm : clipnorm;
}

// The gradient one element's update sees: g is the raw gradient; grad_scale is 1 or clipnorm's
// factor, or with tensor_clipnorm the tensor's tensor_clip_divisor; then clipvalue's clamp.
CROSSOVER_HD float clipped_gradient(const OptimizerConfig& c, float g, float grad_scale) {
  if (c.tensor_clipnorm > 0.0f) return g * c.tensor_clipnorm / grad_scale;
  g *= grad_scale;
  if (c.clipvalue <= 0.0f) return g;
  return g < -c.clipvalue ? -c.clipvalue : (g > c.clipvalue ? c.clipvalue : g);
}

// The decay factor of one parameter tensor for this step: lr * weight_decay for kernels and 0 for
// biases (decoupled, applied after clipping and before the step as Keras 3 does).
CROSSOVER_HD float decay_factor(const OptimizerConfig& c, const UpdateConstants& u, bool decay) {
  return decay ? c.weight_decay * u.lr : 0.0f;
}

// One element i of one parameter tensor, by its optimizer's unit (device code calls this; the CPU
// loops per unit, update_elements). slot3 is read only by Adam with amsgrad.
CROSSOVER_HD void update_one(const OptimizerConfig& c, const UpdateConstants& u, float grad_scale,
                             bool decay, float& w, float g_raw, float* slot1, float* slot2,
                             float* slot3, int64_t i) {
  const float g = clipped_gradient(c, g_raw, grad_scale);
  const float d = decay_factor(c, u, decay);
  switch (c.kind) {
#define CROSSOVER_ELEMENT(kind, Unit)                                           \
  case OptimizerKind::kind:                                                     \
    optimizers::Unit::element(c.args.kind, u, d, w, g, slot1, slot2, slot3, i); \
    return;
    CROSSOVER_OPTIMIZERS(CROSSOVER_ELEMENT)
#undef CROSSOVER_ELEMENT
  }
}

// Numerically stable softmax of one row of n logits.
// p = softmax(z); returns log(sum_j exp(z_j)), from the same exponentials.
CROSSOVER_HD double softmax_row(const float* z, float* p, int64_t n) {
  float mx = z[0];
  for (int64_t j = 1; j < n; ++j) mx = fmaxf(mx, z[j]);
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) sum += (p[j] = std::exp(z[j] - mx));
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < n; ++j) p[j] *= inv;
  return static_cast<double>(mx) + std::log(static_cast<double>(sum));
}

// log(sum_j exp(z_j)) of one row, as softmax_row computes it (without writing the softmax).
CROSSOVER_HD double logsumexp_row(const float* z, int64_t n) {
  float mx = z[0];
  for (int64_t j = 1; j < n; ++j) mx = fmaxf(mx, z[j]);
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) sum += std::exp(z[j] - mx);
  return static_cast<double>(mx) + std::log(static_cast<double>(sum));
}

CROSSOVER_HD int64_t argmax_row(const float* p, int64_t n) {
  int64_t best = 0;
  for (int64_t j = 1; j < n; ++j)
    if (p[j] > p[best]) best = j;
  return best;
}

struct LossRow {
  double loss = 0;     // this sample's loss
  double correct = 0;  // 1 if right (binary: fraction of elements right)
};

// ---- Keras's activations, one element at a time ----
// Templates so that the tests can take them in double (finite differences); the engine uses
// float.

// SELU's constants (Klambauer et al.), as Keras writes them.
inline constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
inline constexpr double kSeluScale = 1.0507009873554804934193349852946;

// y = act(x) for an elementwise activation (softmax is per row: softmax_row). alpha: leaky_relu's
// negative_slope, elu's alpha.
template <typename T>
CROSSOVER_HD T activation_value(ActivationKind a, T x, T alpha) {
  const T zero = 0, one = 1;
  switch (a) {
    case ActivationKind::relu:
      return std::fmax(x, zero);
    case ActivationKind::sigmoid:
      return one / (one + std::exp(-x));
    case ActivationKind::tanh:
      return std::tanh(x);
    case ActivationKind::elu:  // exp(x) - 1 as TensorFlow computes it (not expm1)
      return x > zero ? x : alpha * (std::exp(x) - one);
    case ActivationKind::selu:
      return T(kSeluScale) * (x > zero ? x : T(kSeluAlpha) * (std::exp(x) - one));
    case ActivationKind::leaky_relu:
      return x >= zero ? x : alpha * x;
    case ActivationKind::gelu:  // exact: x * Phi(x), with erfc for the far negative tail
      return T(0.5) * x * std::erfc(-x * T(0.70710678118654752));
    case ActivationKind::softplus:  // log(1 + exp(x)) without overflow
      return std::fmax(x, zero) + std::log1p(std::exp(-std::fabs(x)));
    case ActivationKind::swish:
      return x / (one + std::exp(-x));
    case ActivationKind::exponential:
      return std::exp(x);
    case ActivationKind::sqrt:
      return std::sqrt(x);
    default:
      return x;  // linear
  }
}

// d act / dx at the element whose input is x and output y (x is read only where
// activation_needs_input; elsewhere any value may be passed). At a kink (relu, leaky_relu and
// elu at 0) the derivative is the left one, as TensorFlow's.
template <typename T>
CROSSOVER_HD T activation_derivative(ActivationKind a, T x, T y, T alpha) {
  const T zero = 0, one = 1;
  switch (a) {
    case ActivationKind::relu:
      return y > zero ? one : zero;
    case ActivationKind::sigmoid:
      return y * (one - y);
    case ActivationKind::tanh:
      return one - y * y;
    case ActivationKind::elu:  // alpha * exp(x) = y + alpha below 0
      return y > zero ? one : y + alpha;
    case ActivationKind::selu:  // scale * alpha * exp(x) = y + scale * alpha below 0
      return y > zero ? T(kSeluScale) : y + T(kSeluScale * kSeluAlpha);
    case ActivationKind::leaky_relu:
      return y > zero ? one : alpha;
    case ActivationKind::gelu:  // Phi(x) + x phi(x)
      return T(0.5) * std::erfc(-x * T(0.70710678118654752)) +
             x * T(0.39894228040143268) * std::exp(T(-0.5) * x * x);
    case ActivationKind::softplus:  // sigmoid(x) = 1 - exp(-y)
      return -std::expm1(-y);
    case ActivationKind::swish: {  // s + x s (1 - s), s = sigmoid(x)
      const T sig = one / (one + std::exp(-x));
      return sig * (one + x * (one - sig));
    }
    case ActivationKind::exponential:
      return y;
    case ActivationKind::sqrt:  // 1 / (2 sqrt(x)), as TensorFlow's from the output
      return T(0.5) / y;
    default:
      return one;  // linear
  }
}

// Keras's clipping of probabilities in binary cross-entropy.
inline constexpr float kProbabilityEpsilon = 1e-7f;

// A cross-entropy of probabilities p given directly (c values; not a softmax the loss applies),
// as Keras's TensorFlow backend computes it: sparse (label), -log of p's values clipped to
// [eps, 1 - eps] under their log-softmax, i.e. renormalised after the clipping; categorical
// (targets t), -sum t log q with q = p / sum(p) clipped to [eps, 1 - eps]. The gradient of
// (loss * inv_m) with respect to p into d (when not null); clipping passes none outside its
// range, as tf.clip_by_value's.
CROSSOVER_HD double probability_crossentropy(bool sparse, int64_t label, const float* t,
                                             const float* p, float* d, int64_t c, float inv_m) {
  const float lo = kProbabilityEpsilon, hi = 1.0f - kProbabilityEpsilon;
  double sum = 0.0;
  if (sparse) {
    for (int64_t j = 0; j < c; ++j) sum += fminf(fmaxf(p[j], lo), hi);
    const double py = fminf(fmaxf(p[label], lo), hi);
    if (d)
      for (int64_t j = 0; j < c; ++j) {
        const bool inside = p[j] >= lo && p[j] <= hi;
        const double g = 1.0 / sum - (j == label ? 1.0 / py : 0.0);
        d[j] = inside ? static_cast<float>(g) * inv_m : 0.0f;
      }
    return std::log(sum) - std::log(py);
  }
  for (int64_t j = 0; j < c; ++j) sum += p[j];
  double loss = 0.0, gq = 0.0;  // gq: sum_j (d loss / d q_j) q_j
  for (int64_t j = 0; j < c; ++j) {
    const double q = p[j] / sum, qc = fmin(fmax(q, lo), hi);
    loss -= t[j] * std::log(qc);
    if (q >= lo && q <= hi) gq -= t[j] / qc * q;
  }
  if (d)
    for (int64_t j = 0; j < c; ++j) {
      const double q = p[j] / sum, qc = fmin(fmax(q, lo), hi);
      const double g = q >= lo && q <= hi ? -t[j] / qc : 0.0;
      d[j] = static_cast<float>((g - gq) / sum) * inv_m;
    }
  return loss;
}

// One sample's (row r's) value of a metric, Keras 3's definition (keras/src/metrics): pred is the
// model's output row (c values), targets (rows, target_cols) with target_cols c or 1 (a class
// index, or one value broadcast over the row as Keras's squeeze_or_expand_to_same_rank does).
// parameter: binary accuracy's threshold, top-k's k.
CROSSOVER_HD double metric_row(MetricKind kind, const float* pred, const float* targets, int64_t r,
                               int64_t c, int64_t target_cols, float parameter) {
  const float* t = targets + r * target_cols;
  const int64_t step = target_cols == 1 ? 0 : 1;  // t[j * step]: the row's target for column j
  switch (kind) {
    case MetricKind::mean_absolute_error:
    case MetricKind::mean_squared_error: {
      double sum = 0.0;
      for (int64_t j = 0; j < c; ++j) {
        const float e = t[j * step] - pred[j];
        sum += kind == MetricKind::mean_absolute_error ? std::fabs(static_cast<double>(e))
                                                       : static_cast<double>(e) * e;
      }
      return sum / static_cast<double>(c);
    }
    case MetricKind::binary_accuracy: {
      double right = 0.0;
      for (int64_t j = 0; j < c; ++j)
        right += t[j * step] == (pred[j] > parameter ? 1.0f : 0.0f) ? 1.0 : 0.0;
      return right / static_cast<double>(c);
    }
    case MetricKind::categorical_accuracy:
      return argmax_row(pred, c) == argmax_row(t, target_cols) ? 1.0 : 0.0;
    case MetricKind::sparse_categorical_accuracy:
      return static_cast<float>(argmax_row(pred, c)) == t[0] ? 1.0 : 0.0;
    case MetricKind::top_k_categorical_accuracy:
    case MetricKind::sparse_top_k_categorical_accuracy: {
      // TensorFlow's in_top_k: the truth's score is in the top k when fewer than k scores are
      // greater (ties at the boundary count in).
      const int64_t truth = kind == MetricKind::top_k_categorical_accuracy
                                ? argmax_row(t, target_cols)
                                : static_cast<int64_t>(t[0]);
      if (truth < 0 || truth >= c) return 0.0;
      int64_t greater = 0;
      for (int64_t j = 0; j < c; ++j) greater += pred[j] > pred[truth] ? 1 : 0;
      return static_cast<double>(greater) < static_cast<double>(parameter) ? 1.0 : 0.0;
    }
  }
  return 0.0;
}

}  // namespace crossover
