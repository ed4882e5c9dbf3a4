// Keras 3's initializers (keras.initializers): how a parameter's initial values are drawn.
//
//   Layer d = Dense(100, "selu");
//   d.kernel_initializer = LecunNormal();
//
// The distributions are Keras's (VarianceScaling's fans, scale and truncation; RandomNormal's
// mean and standard deviation; ...), the numbers crossover's own: Philox draws keyed by the
// model's seed, the layer and the parameter, so the same on every device. Keras's own random
// numbers cannot be reproduced (its generator is its backend's), nor is the `seed` of an
// initializer used: it is kept only to be written back to a model file.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/tensor.h"

namespace crossover {

// Each Keras class crossover has. The VarianceScaling family keeps its own name so that a model
// file says HeNormal where the user wrote it.
enum class InitializerKind {
  zeros,
  ones,
  constant,
  random_normal,
  random_uniform,
  truncated_normal,
  variance_scaling,
  glorot_uniform,
  glorot_normal,
  he_normal,
  he_uniform,
  lecun_normal,
  lecun_uniform,
  identity,
  orthogonal,
};

// VarianceScaling's mode: the fan the variance is divided by.
enum class FanMode { fan_in, fan_out, fan_avg };
// VarianceScaling's distribution. truncated_normal cuts at two standard deviations (re-drawing
// what falls outside) and widens the standard deviation by 1 / 0.87962566103423978 so that the
// variance stays scale / fan, as Keras does.
enum class Distribution { truncated_normal, untruncated_normal, uniform };

struct Initializer {
  InitializerKind kind = InitializerKind::zeros;
  double value = 0.0;                    // constant
  double mean = 0.0, stddev = 0.05;      // random_normal, truncated_normal
  double minval = -0.05, maxval = 0.05;  // random_uniform
  double scale = 1.0;                    // variance_scaling (and its named forms)
  FanMode mode = FanMode::fan_in;
  Distribution distribution = Distribution::truncated_normal;
  double gain = 1.0;            // identity, orthogonal
  std::optional<int64_t> seed;  // Keras's seed, written back; the draws ignore it
  // (offset, count): that block of the values is ones whatever the initializer draws (an LSTM's
  // unit_forget_bias: the forget gate's bias, as Keras concatenates it). Not a Keras argument.
  std::array<int64_t, 2> ones_block{0, 0};
  bool operator==(const Initializer&) const = default;
};

// Keras's constructors and defaults.
Initializer Zeros();
Initializer Ones();
Initializer Constant(double value = 0.0);
Initializer RandomNormal(double mean = 0.0, double stddev = 0.05);
Initializer RandomUniform(double minval = -0.05, double maxval = 0.05);
Initializer TruncatedNormal(double mean = 0.0, double stddev = 0.05);
// Requires scale > 0.
Initializer VarianceScaling(double scale = 1.0, FanMode mode = FanMode::fan_in,
                            Distribution distribution = Distribution::truncated_normal);
Initializer GlorotUniform();  // VarianceScaling(1, fan_avg, uniform)
Initializer GlorotNormal();   // VarianceScaling(1, fan_avg, truncated_normal)
Initializer HeNormal();       // VarianceScaling(2, fan_in, truncated_normal)
Initializer HeUniform();      // VarianceScaling(2, fan_in, uniform)
Initializer LecunNormal();    // VarianceScaling(1, fan_in, truncated_normal)
Initializer LecunUniform();   // VarianceScaling(1, fan_in, uniform)
Initializer Identity(double gain = 1.0);
Initializer Orthogonal(double gain = 1.0);

// Keras's class name ("HeNormal").
std::string_view initializer_class_name(InitializerKind kind);
// The kind of a Keras class name or string identifier ("HeNormal", "he_normal", "Identity",
// "normal", "IdentityInitializer", ...); nullopt for any other.
std::optional<InitializerKind> initializer_kind_from_name(std::string_view name);
// The named forms of VarianceScaling with their scale, mode and distribution; the others as given.
Initializer with_kind_defaults(InitializerKind kind);
std::string_view fan_mode_name(FanMode m);           // "fan_in", ...
std::string_view distribution_name(Distribution d);  // "truncated_normal", ...

// Keras 3's serialized initializer as JSON text ({"module": "keras.initializers", "class_name",
// "config": its get_config(), "registered_name": null}), and back from that or from a JSON string
// holding an identifier ("\"he_normal\""). Throws Error(where, why) for what crossover lacks. (The
// model files read and write the same through nn/layers/keras_config.h.)
std::string initializer_to_keras_json(const Initializer& init);
Initializer initializer_from_keras_json(std::string_view text, const std::string& where);

// Keras's compute_fans: a kernel (..., in, out) has fan_in = in * receptive field and fan_out =
// out * receptive field (the receptive field: the product of the leading dimensions); a vector
// (n,) has n for both; a scalar 1.
struct Fans {
  double in = 1, out = 1;
};
Fans compute_fans(const Shape& shape);

// The standard deviation of Keras's truncated normal of unit variance before the cut at +-2.
inline constexpr double kTruncatedNormalStddev = 0.87962566103423978;

// Where a parameter's draws come from: the model's seed, the layer's place in the model and the
// parameter's place in its layer (kernel 0, bias 1, ...).
struct DrawKey {
  uint64_t seed = 0;
  uint32_t layer = 0;
  uint32_t param = 0;
};

// Fills `out` (shape's element count, row-major) with the initializer's values. GlorotUniform's
// (and every uniform VarianceScaling's) element e is (2u - 1) * limit with u Philox's uniform of
// element e (stream init, owner layer, draw param). Throws Error("initializer", ...) where Keras
// refuses the shape (Identity: not 2-D; Orthogonal: fewer than 2 dimensions).
void initial_values(const Initializer& init, const Shape& shape, const DrawKey& key,
                    std::span<float> out);

}  // namespace crossover
