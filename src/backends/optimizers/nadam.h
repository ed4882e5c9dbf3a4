// Keras 3's Nadam (keras/src/optimizers/nadam.py): Adam with Nesterov momentum and a momentum
// schedule u(s) = beta_1 (1 - 0.5 * 0.96^s), whose running product it carries between steps.
#pragma once

#include "backends/optimizers/unit.h"

namespace crossover::optimizers {

struct Nadam : Unit {
  static constexpr std::string_view class_name = "Nadam", name = "nadam";
  static constexpr bool carries_value = true;  // u_product
  struct Options {
    double learning_rate = 1e-3;
    double beta_1 = 0.9;
    double beta_2 = 0.999;
    double epsilon = 1e-7;
    double weight_decay = 0;
    double clipnorm = 0;
    double clipvalue = 0;
  };
  static constexpr std::array arguments = betas_and_epsilon<Options>();
  static constexpr SlotNames slots(const Options&) { return {"momentum", "velocity", ""}; }

  // The momentum schedule factor 1 - 0.5 * 0.96^s (float32, as Keras computes it).
  CROSSOVER_HD static float schedule(int64_t s) { return 1.0f - 0.5f * float_power(0.96, s); }
  // u_product after `steps` steps, accumulated as Keras's _backend_update_step does each step:
  // u_product = u_product * beta_1 * (1 - 0.5 * 0.96^s), left to right in float32.
  CROSSOVER_HD static float u_product_after(double beta1, int64_t steps) {
    const auto b1 = static_cast<float>(beta1);
    float p = 1.0f;
    for (int64_t s = 1; s <= steps; ++s) p = p * b1 * schedule(s);
    return p;
  }

  enum Constant {
    u_next,                  // u(t + 1)
    one_minus_u,             // 1 - u(t)
    one_minus_product,       // 1 - u_product(t), the product through step t
    one_minus_product_next,  // 1 - u_product(t) * u(t + 1)
    u_product,               // u_product(t): the value carried after this step
    one_minus_beta1,
    one_minus_beta2,
    one_minus_beta2_power,  // 1 - beta_2^t
  };
  // nadam.py casts beta_1 and beta_2 to float32 first, so 1 - beta is float32 arithmetic here
  // (unlike Adam's). u_product(t) = u_product(t - 1) * beta_1 * schedule(t) is what
  // _backend_update_step assigns before update_step reads it; u_product(t - 1) is the carried
  // value when it is current, else recomputed from the step (after a restored step count).
  CROSSOVER_HD static void constants(const Options& o, int64_t t, const CarriedValue& carried,
                                     UpdateConstants& u) {
    const float before = carried.step == t - 1 ? carried.value : u_product_after(o.beta_1, t - 1);
    const auto b1 = static_cast<float>(o.beta_1), b2 = static_cast<float>(o.beta_2);
    const float u_t = b1 * schedule(t), next = b1 * schedule(t + 1);
    const float product = before * b1 * schedule(t);
    u.k[u_next] = next;
    u.k[one_minus_u] = 1.0f - u_t;
    u.k[one_minus_product] = 1.0f - product;
    u.k[one_minus_product_next] = 1.0f - product * next;
    u.k[u_product] = product;
    u.k[one_minus_beta1] = 1.0f - b1;
    u.k[one_minus_beta2] = 1.0f - b2;
    u.k[one_minus_beta2_power] = 1.0f - float_power(o.beta_2, t);
  }
  CROSSOVER_HD static void carry(const Options&, const UpdateConstants& u, CarriedValue& carried,
                                 int64_t t) {
    carried.step = t;
    carried.value = u.k[u_product];
  }
  // m += (g - m)(1 - b1); v += (g^2 - v)(1 - b2);
  // m_hat = u(t+1) m / (1 - u_product(t) u(t+1)) + (1 - u(t)) g / (1 - u_product(t));
  // v_hat = v / (1 - b2^t); w -= m_hat lr / (sqrt(v_hat) + epsilon).
  CROSSOVER_HD static void element(const Options& o, const UpdateConstants& u, float decay,
                                   float& w, float g, float* s1, float* s2, float*, int64_t i) {
    w -= w * decay;
    float &m = s1[i], &v = s2[i];
    m += (g - m) * u.k[one_minus_beta1];
    v += (g * g - v) * u.k[one_minus_beta2];
    const float m_hat = u.k[u_next] * m / u.k[one_minus_product_next] +
                        u.k[one_minus_u] * g / u.k[one_minus_product];
    const float v_hat = v / u.k[one_minus_beta2_power];
    w -= m_hat * u.lr / (std::sqrt(v_hat) + static_cast<float>(o.epsilon));
  }
};

}  // namespace crossover::optimizers
