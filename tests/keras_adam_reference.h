// Keras 3.15's Adam (keras/src/optimizers/adam.py, update_step), amsgrad or not, in float64, for
// the optimizer tests of both devices (optimizer_test.cpp, cuda_backend_test.cpp):
//   m += (g - m)(1 - beta_1); v += (g^2 - v)(1 - beta_2);
//   amsgrad: v_hat = maximum(v_hat, v), and v_hat in v's place below;
//   w -= m alpha / (sqrt(v) + epsilon), alpha = lr sqrt(1 - beta_2^t) / (1 - beta_1^t),
// with decoupled weight decay first (w -= w lr weight_decay, kernels only). The betas are raised
// to t as float32 values (Keras casts them to the variable's dtype first); 1 - beta is taken from
// the double, as Keras's Python does.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace crossover::testing_util {

struct KerasAdamReference {
  double lr = 1e-3, beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-7, weight_decay = 0;
  bool amsgrad = false;
  std::vector<double> w, m, v, v_hat;  // the weights (set before the first step) and the slots

  // Step t (1, 2, ...) with gradient g; the slots start at zero.
  void step(int t, const std::vector<double>& g) {
    m.resize(w.size(), 0.0);
    v.resize(w.size(), 0.0);
    v_hat.resize(w.size(), 0.0);
    const double b1t = std::pow(static_cast<double>(static_cast<float>(beta_1)), t);
    const double b2t = std::pow(static_cast<double>(static_cast<float>(beta_2)), t);
    const double alpha = lr * std::sqrt(1 - b2t) / (1 - b1t);
    for (std::size_t i = 0; i < w.size(); ++i) {
      w[i] -= w[i] * lr * weight_decay;
      m[i] += (g[i] - m[i]) * (1 - beta_1);
      v[i] += (g[i] * g[i] - v[i]) * (1 - beta_2);
      double denominator = v[i];
      if (amsgrad) denominator = v_hat[i] = std::max(v_hat[i], v[i]);
      w[i] -= m[i] * alpha / (std::sqrt(denominator) + epsilon);
    }
  }
};

// A gradient whose size drops a hundredfold after two steps (and changes sign), so that v
// decreases from the third step on and amsgrad's v_hat (its maximum so far) differs from it.
inline double falling_gradient(double g0, int t) {  // t = 1, 2, ...
  return g0 * (t <= 2 ? 1.0 : 0.01 * (1.0 + 0.3 * t)) * (t % 3 == 2 ? -1.0 : 1.0);
}

}  // namespace crossover::testing_util
