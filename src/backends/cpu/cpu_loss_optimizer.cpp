// The CPU backend's losses and metrics (summed in row order) and its optimizer step: a loop per
// optimizer over chunks of each tensor, one chunk per thread.
#include <algorithm>
#include <limits>
#include <span>

#include "backends/cpu/cpu_backend_impl.h"
#include "backends/kernel_math.h"
#include "backends/losses/list.h"

namespace crossover::cpu {
namespace {

// Adam over n elements: a plain function of restrict pointers, so that it vectorises.
__attribute__((noinline)) void adam_range(float one_minus_beta1, float one_minus_beta2,
                                          float epsilon, float alpha, float decay, float grad_scale,
                                          float lo, float hi, float* __restrict w,
                                          const float* __restrict g, float* __restrict m,
                                          float* __restrict v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = std::min(std::max(g[i] * grad_scale, lo), hi);
    optimizers::adam_update(one_minus_beta1, one_minus_beta2, epsilon, alpha, decay, w[i], gi, m[i],
                            v[i]);
  }
}

// The same with amsgrad: v_hat, the running maximum of v, in v's place in the step.
__attribute__((noinline)) void adam_amsgrad_range(float one_minus_beta1, float one_minus_beta2,
                                                  float epsilon, float alpha, float decay,
                                                  float grad_scale, float lo, float hi,
                                                  float* __restrict w, const float* __restrict g,
                                                  float* __restrict m, float* __restrict v,
                                                  float* __restrict v_hat, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = std::min(std::max(g[i] * grad_scale, lo), hi);
    optimizers::adam_amsgrad_update(one_minus_beta1, one_minus_beta2, epsilon, alpha, decay, w[i],
                                    gi, m[i], v[i], v_hat[i]);
  }
}

}  // namespace

void CpuBackend::loss_forward_backward(LossConfig loss, ActivationKind act, const float* out,
                                       const float* targets, const float* weights, float* probs,
                                       float* d_out, int64_t m, int64_t c, StepCounters* counters,
                                       int64_t mean_rows) {
  double loss_sum = 0.0, correct = 0.0;
  const float inv_m = 1.0f / static_cast<float>(mean_rows);
  for (int64_t r = 0; r < m; ++r) {
    const float* z = out + r * c;
    float* p = probs ? probs + r * c : scratch_row(c);
    float* d = d_out ? d_out + r * c : nullptr;
    const LossRow row = weights
                            ? weighted_loss_row(loss, act, z, targets, weights, r, c, p, d, inv_m)
                            : loss_row(loss, act, z, targets, r, c, p, d, inv_m);
    loss_sum += row.loss;
    correct += row.correct;
  }
  if (counters) {
    counters->loss_sum += loss_sum;
    counters->correct_sum += correct;
    counters->sample_count += static_cast<double>(m);
  }
}

void CpuBackend::metric_sum(MetricKind kind, const float* pred, const float* targets, int64_t m,
                            int64_t c, int64_t target_cols, float parameter, double* sum) {
  double s = 0.0;  // in row order, as the loss's sums
  for (int64_t r = 0; r < m; ++r)
    s += metric_row(kind, pred + r * c, targets, r, c, target_cols, parameter);
  *sum += s;
}

void CpuBackend::regularize(const float* value, float* grad, int64_t n, float l1, float l2,
                            float linear, StepCounters* counters, int64_t rows) {
  if (grad)
    for (int64_t i = 0; i < n; ++i) grad[i] += regularizer_gradient(value[i], l1, l2, linear);
  if (!counters) return;
  // In order, one thread: the sum is the same for every thread count.
  double penalty = 0.0;
  for (int64_t i = 0; i < n; ++i) penalty += regularizer_penalty(value[i], l1, l2, linear);
  counters->loss_sum += penalty * static_cast<double>(rows);
}

void CpuBackend::optimizer_step(const OptimizerConfig& config, std::span<const ParamSlot> params,
                                StepCounters* counters) {
  require_amsgrad_slots(config, params);
  const int64_t t = counters->step + 1;
  const float lr = scheduled_learning_rate(config.schedule, counters->step);
  counters->learning_rate = lr;
  float grad_scale = 1.0f;
  if (config.clipnorm > 0.0f) {
    double sum_squares = 0.0;
    for (const ParamSlot& p : params)
      for (int64_t i = 0; i < p.n; ++i) sum_squares += static_cast<double>(p.grad[i]) * p.grad[i];
    grad_scale = clipnorm_scale(config.clipnorm, sum_squares);
  }
  counters->grad_scale = grad_scale;
  const UpdateConstants uc = update_constants(config, lr, t, *counters);
  for (const ParamSlot& p : params) {
    // Keras's clipnorm: the tensor's own norm, one more pass over its gradient.
    const float scale = config.tensor_clipnorm > 0.0f
                            ? tensor_clip_divisor(config.tensor_clipnorm, sum_of_squares(p))
                            : grad_scale;
    update_tensor(config, uc, scale, p);
    weights_changed(p.value, static_cast<std::size_t>(p.n) * sizeof(float));
  }
  record_step(config, uc, *counters, t);
  counters->step += 1;
  counters->batch_index += 1;
}

void CpuBackend::advance_batch(StepCounters* counters) { counters->batch_index += 1; }

double CpuBackend::sum_of_squares(const ParamSlot& p) {
  double s = 0.0;
  for (int64_t i = 0; i < p.n; ++i) s += static_cast<double>(p.grad[i]) * p.grad[i];
  return s;
}

// One parameter tensor, a loop per optimizer; chunks of it per thread.
void CpuBackend::update_tensor(const OptimizerConfig& config, const UpdateConstants& constants,
                               float grad_scale, const ParamSlot& p) {
  parallel_chunks(p.n, [&](int64_t begin, int64_t end) {
    update_range(config, constants, grad_scale, p, begin, end);
  });
}

// Elements [begin, end) of one parameter tensor, on the calling thread. The constants are loaded
// into locals first and clipping is a branch-free clamp, so each loop vectorises.
void CpuBackend::update_range(const OptimizerConfig& config, const UpdateConstants& constants,
                              float grad_scale, const ParamSlot& p, int64_t begin, int64_t end) {
  const OptimizerConfig c = config;
  const UpdateConstants u = constants;
  const float decay = decay_factor(c, u, p.decay);
  const float hi = c.clipvalue > 0.0f ? c.clipvalue : std::numeric_limits<float>::infinity();
  const float lo = -hi;
  float* __restrict w = p.value;
  const float* __restrict g = p.grad;
  float* __restrict s1 = p.slot1;
  float* __restrict s2 = p.slot2;
  float* __restrict s3 = p.slot3;
  if (c.kind == OptimizerKind::adam && c.tensor_clipnorm <= 0.0f) {
    // Adam's own loop: the clamp is branch-free, so it vectorises (the optimizer most run).
    using optimizers::Adam;
    const auto eps = static_cast<float>(c.args.adam.epsilon);
    if (c.args.adam.amsgrad)
      adam_amsgrad_range(u.k[Adam::one_minus_beta1], u.k[Adam::one_minus_beta2], eps,
                         u.k[Adam::alpha], decay, grad_scale, lo, hi, w + begin, g + begin,
                         s1 + begin, s2 + begin, s3 + begin, end - begin);
    else
      adam_range(u.k[Adam::one_minus_beta1], u.k[Adam::one_minus_beta2], eps, u.k[Adam::alpha],
                 decay, grad_scale, lo, hi, w + begin, g + begin, s1 + begin, s2 + begin,
                 end - begin);
    return;
  }
  switch (c.kind) {
#define CROSSOVER_RANGE(kind, Unit)                                                    \
  case OptimizerKind::kind:                                                            \
    for (int64_t i = begin; i < end; ++i)                                              \
      optimizers::Unit::element(c.args.kind, u, decay, w[i],                           \
                                clipped_gradient(c, g[i], grad_scale), s1, s2, s3, i); \
    return;
    CROSSOVER_OPTIMIZERS(CROSSOVER_RANGE)
#undef CROSSOVER_RANGE
  }
}

}  // namespace crossover::cpu
