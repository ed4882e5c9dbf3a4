#include "nn/initializers.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <vector>

#include "core/error.h"
#include "core/philox.h"
#include "nn/layers/keras_config.h"

namespace crossover {

namespace {

Initializer of(InitializerKind kind) {
  Initializer i;
  i.kind = kind;
  return i;
}

Initializer scaling(InitializerKind kind, double scale, FanMode mode, Distribution d) {
  Initializer i = of(kind);
  i.scale = scale;
  i.mode = mode;
  i.distribution = d;
  return i;
}

struct Name {
  InitializerKind kind;
  std::string_view cls;
  std::string_view id;  // Keras's snake-case identifier
};

// Keras 3's classes and their identifiers (keras/src/initializers/__init__.py).
constexpr std::array<Name, 15> kNames{{
    {InitializerKind::zeros, "Zeros", "zeros"},
    {InitializerKind::ones, "Ones", "ones"},
    {InitializerKind::constant, "Constant", "constant"},
    {InitializerKind::random_normal, "RandomNormal", "random_normal"},
    {InitializerKind::random_uniform, "RandomUniform", "random_uniform"},
    {InitializerKind::truncated_normal, "TruncatedNormal", "truncated_normal"},
    {InitializerKind::variance_scaling, "VarianceScaling", "variance_scaling"},
    {InitializerKind::glorot_uniform, "GlorotUniform", "glorot_uniform"},
    {InitializerKind::glorot_normal, "GlorotNormal", "glorot_normal"},
    {InitializerKind::he_normal, "HeNormal", "he_normal"},
    {InitializerKind::he_uniform, "HeUniform", "he_uniform"},
    {InitializerKind::lecun_normal, "LecunNormal", "lecun_normal"},
    {InitializerKind::lecun_uniform, "LecunUniform", "lecun_uniform"},
    {InitializerKind::identity, "Identity", "identity"},
    {InitializerKind::orthogonal, "Orthogonal", "orthogonal"},
}};

// Box-Muller on one Philox block: four standard normals from its four uniforms (u1 in (0, 1] so
// that the logarithm is finite), in double.
std::array<double, 4> normals(const Philox4x32& b) {
  std::array<double, 4> z{};
  for (int pair = 0; pair < 2; ++pair) {
    const double u1 = 1.0 - static_cast<double>(uniform01(b.v[2 * pair]));
    const double u2 = static_cast<double>(uniform01(b.v[2 * pair + 1]));
    const double r = std::sqrt(-2.0 * std::log(u1));
    z[2 * pair] = r * std::cos(2.0 * std::numbers::pi * u2);
    z[2 * pair + 1] = r * std::sin(2.0 * std::numbers::pi * u2);
  }
  return z;
}

// Parameter draws 0..15 of a layer are its parameters; a truncated normal's re-draws use
// draw param + 16 * round.
constexpr uint64_t kParamsPerLayer = 16;

// Element e's standard normal: the first of its block's four (untruncated), or the first within
// [-2, 2] of its block, then of the next rounds' blocks (truncated; all four fall outside with
// probability 4e-6, so a second round is rare and a third rarer still).
double standard_normal(const DrawKey& k, uint64_t e, bool truncated) {
  for (uint64_t round = 0;; ++round) {
    const Philox4x32 b = philox_block(k.seed, RngStream::init, k.layer,
                                      k.param % kParamsPerLayer + kParamsPerLayer * round, e);
    const std::array<double, 4> z = normals(b);
    if (!truncated) return z[0];
    for (double v : z)
      if (std::fabs(v) <= 2.0) return v;
  }
}

// Keras's Orthogonal: the Q of the QR decomposition of a (max(rows, cols), min(rows, cols))
// normal matrix, signed so that R's diagonal is positive (which Gram-Schmidt gives), transposed
// when rows < cols; rows = the product of all dimensions but the last.
void orthogonal(const Initializer& init, const Shape& shape, const DrawKey& key,
                std::span<float> out) {
  int64_t rows = 1;
  for (std::size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
  const int64_t cols = shape.back();
  const int64_t tall = std::max(rows, cols), narrow = std::min(rows, cols);
  // q: `narrow` columns of `tall` values, column j contiguous; element (i, j) of the drawn matrix
  // is draw i * narrow + j.
  std::vector<double> q(static_cast<std::size_t>(tall * narrow));
  for (int64_t i = 0; i < tall; ++i)
    for (int64_t j = 0; j < narrow; ++j)
      q[static_cast<std::size_t>(j * tall + i)] =
          standard_normal(key, static_cast<uint64_t>(i * narrow + j), false);
  // Modified Gram-Schmidt, twice per column (one pass loses orthogonality on ill-conditioned
  // draws).
  for (int64_t j = 0; j < narrow; ++j) {
    double* v = q.data() + j * tall;
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t k = 0; k < j; ++k) {
        const double* u = q.data() + k * tall;
        double dot = 0;
        for (int64_t i = 0; i < tall; ++i) dot += u[i] * v[i];
        for (int64_t i = 0; i < tall; ++i) v[i] -= dot * u[i];
      }
    double norm = 0;
    for (int64_t i = 0; i < tall; ++i) norm += v[i] * v[i];
    norm = std::sqrt(norm);
    if (norm == 0) throw Error("Orthogonal", "the drawn matrix is singular");
    for (int64_t i = 0; i < tall; ++i) v[i] /= norm;
  }
  // out (rows, cols): Q (tall, narrow) itself when rows >= cols, else its transpose.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const double v = rows >= cols ? q[static_cast<std::size_t>(c * tall + r)]
                                    : q[static_cast<std::size_t>(r * tall + c)];
      out[static_cast<std::size_t>(r * cols + c)] = static_cast<float>(init.gain * v);
    }
}

}  // namespace

Initializer Zeros() { return of(InitializerKind::zeros); }
Initializer Ones() { return of(InitializerKind::ones); }
Initializer Constant(double value) {
  Initializer i = of(InitializerKind::constant);
  i.value = value;
  return i;
}
Initializer RandomNormal(double mean, double stddev) {
  Initializer i = of(InitializerKind::random_normal);
  i.mean = mean;
  i.stddev = stddev;
  return i;
}
Initializer RandomUniform(double minval, double maxval) {
  Initializer i = of(InitializerKind::random_uniform);
  i.minval = minval;
  i.maxval = maxval;
  return i;
}
Initializer TruncatedNormal(double mean, double stddev) {
  Initializer i = of(InitializerKind::truncated_normal);
  i.mean = mean;
  i.stddev = stddev;
  return i;
}
Initializer VarianceScaling(double scale, FanMode mode, Distribution distribution) {
  if (!(scale > 0.0))
    throw Error("VarianceScaling", "scale must be a positive number, got " + std::to_string(scale));
  return scaling(InitializerKind::variance_scaling, scale, mode, distribution);
}
Initializer GlorotUniform() {
  return scaling(InitializerKind::glorot_uniform, 1.0, FanMode::fan_avg, Distribution::uniform);
}
Initializer GlorotNormal() {
  return scaling(InitializerKind::glorot_normal, 1.0, FanMode::fan_avg,
                 Distribution::truncated_normal);
}
Initializer HeNormal() {
  return scaling(InitializerKind::he_normal, 2.0, FanMode::fan_in, Distribution::truncated_normal);
}
Initializer HeUniform() {
  return scaling(InitializerKind::he_uniform, 2.0, FanMode::fan_in, Distribution::uniform);
}
Initializer LecunNormal() {
  return scaling(InitializerKind::lecun_normal, 1.0, FanMode::fan_in,
                 Distribution::truncated_normal);
}
Initializer LecunUniform() {
  return scaling(InitializerKind::lecun_uniform, 1.0, FanMode::fan_in, Distribution::uniform);
}
Initializer Identity(double gain) {
  Initializer i = of(InitializerKind::identity);
  i.gain = gain;
  return i;
}
Initializer Orthogonal(double gain) {
  Initializer i = of(InitializerKind::orthogonal);
  i.gain = gain;
  return i;
}

std::string_view initializer_class_name(InitializerKind kind) {
  for (const Name& n : kNames)
    if (n.kind == kind) return n.cls;
  return "Zeros";
}

std::optional<InitializerKind> initializer_kind_from_name(std::string_view name) {
  for (const Name& n : kNames)
    if (name == n.cls || name == n.id) return n.kind;
  // Keras's other identifiers and class aliases.
  if (name == "zero") return InitializerKind::zeros;
  if (name == "one") return InitializerKind::ones;
  if (name == "normal") return InitializerKind::random_normal;
  if (name == "uniform") return InitializerKind::random_uniform;
  if (name == "IdentityInitializer") return InitializerKind::identity;
  if (name == "OrthogonalInitializer") return InitializerKind::orthogonal;
  return std::nullopt;
}

Initializer with_kind_defaults(InitializerKind kind) {
  switch (kind) {
    case InitializerKind::glorot_uniform:
      return GlorotUniform();
    case InitializerKind::glorot_normal:
      return GlorotNormal();
    case InitializerKind::he_normal:
      return HeNormal();
    case InitializerKind::he_uniform:
      return HeUniform();
    case InitializerKind::lecun_normal:
      return LecunNormal();
    case InitializerKind::lecun_uniform:
      return LecunUniform();
    default:
      return of(kind);
  }
}

std::string_view fan_mode_name(FanMode m) {
  switch (m) {
    case FanMode::fan_in:
      return "fan_in";
    case FanMode::fan_out:
      return "fan_out";
    case FanMode::fan_avg:
      return "fan_avg";
  }
  return "fan_in";
}

std::string_view distribution_name(Distribution d) {
  switch (d) {
    case Distribution::truncated_normal:
      return "truncated_normal";
    case Distribution::untruncated_normal:
      return "untruncated_normal";
    case Distribution::uniform:
      return "uniform";
  }
  return "truncated_normal";
}

std::string initializer_to_keras_json(const Initializer& init) {
  return keras_config::initializer_json(init).dump();
}

Initializer initializer_from_keras_json(std::string_view text, const std::string& where) {
  const keras_config::json v = keras_config::json::parse(text, nullptr, false);
  if (v.is_discarded()) throw Error(where, "the initializer is not valid JSON");
  try {
    return keras_config::parse_initializer(v);
  } catch (const std::invalid_argument& e) {
    throw Error(where, e.what());
  }
}

Fans compute_fans(const Shape& shape) {
  const std::size_t r = shape.size();
  if (r == 0) return {};
  if (r == 1) return {static_cast<double>(shape[0]), static_cast<double>(shape[0])};
  int64_t receptive = 1;
  for (std::size_t d = 0; d + 2 < r; ++d) receptive *= shape[d];
  return {static_cast<double>(shape[r - 2] * receptive),
          static_cast<double>(shape[r - 1] * receptive)};
}

namespace {
void draw_values(const Initializer& init, const Shape& shape, const DrawKey& key,
                 std::span<float> out);
}  // namespace

void initial_values(const Initializer& init, const Shape& shape, const DrawKey& key,
                    std::span<float> out) {
  draw_values(init, shape, key, out);
  const auto [offset, count] = init.ones_block;
  if (count > 0 && offset >= 0 && offset + count <= static_cast<int64_t>(out.size()))
    std::fill_n(out.begin() + offset, count, 1.0f);
}

namespace {
void draw_values(const Initializer& init, const Shape& shape, const DrawKey& key,
                 std::span<float> out) {
  const auto n = static_cast<int64_t>(out.size());
  auto uniform = [&](int64_t e) {
    return static_cast<double>(
        philox_uniform(key.seed, RngStream::init, key.layer, key.param, static_cast<uint64_t>(e)));
  };
  switch (init.kind) {
    case InitializerKind::zeros:
    case InitializerKind::ones:
    case InitializerKind::constant: {
      const double v = init.kind == InitializerKind::zeros  ? 0.0
                       : init.kind == InitializerKind::ones ? 1.0
                                                            : init.value;
      std::fill(out.begin(), out.end(), static_cast<float>(v));
      return;
    }
    case InitializerKind::random_uniform:
      for (int64_t e = 0; e < n; ++e)
        out[static_cast<std::size_t>(e)] =
            static_cast<float>(init.minval + (init.maxval - init.minval) * uniform(e));
      return;
    case InitializerKind::random_normal:
    case InitializerKind::truncated_normal: {
      const bool cut = init.kind == InitializerKind::truncated_normal;
      for (int64_t e = 0; e < n; ++e)
        out[static_cast<std::size_t>(e)] = static_cast<float>(
            init.mean + init.stddev * standard_normal(key, static_cast<uint64_t>(e), cut));
      return;
    }
    case InitializerKind::identity: {
      if (shape.size() != 2)
        throw Error("initializer", "Identity can only initialize 2-D matrices, not shape " +
                                       shape_to_string(shape));
      std::fill(out.begin(), out.end(), 0.0f);
      for (int64_t i = 0; i < std::min(shape[0], shape[1]); ++i)
        out[static_cast<std::size_t>(i * shape[1] + i)] = static_cast<float>(init.gain);
      return;
    }
    case InitializerKind::orthogonal:
      if (shape.size() < 2)
        throw Error("initializer",
                    "Orthogonal needs a tensor of at least 2 dimensions, not shape " +
                        shape_to_string(shape));
      orthogonal(init, shape, key, out);
      return;
    default:
      break;
  }
  // VarianceScaling and its named forms, as Keras computes them.
  const Fans fans = compute_fans(shape);
  if (init.distribution == Distribution::uniform) {
    // limit = sqrt(3 * scale / fan); fan_avg's sqrt(6 * scale / (fan_in + fan_out)) is the same
    // number, written so that GlorotUniform's limit is sqrt(6 / (fan_in + fan_out)) bit for bit
    // as crossover has always drawn it.
    double limit = 0;
    if (init.mode == FanMode::fan_avg)
      limit = (fans.in + fans.out) / 2.0 >= 1.0 ? std::sqrt(6.0 * init.scale / (fans.in + fans.out))
                                                : std::sqrt(3.0 * init.scale);
    else
      limit = std::sqrt(3.0 * init.scale /
                        std::max(1.0, init.mode == FanMode::fan_in ? fans.in : fans.out));
    for (int64_t e = 0; e < n; ++e)
      out[static_cast<std::size_t>(e)] = static_cast<float>((2.0 * uniform(e) - 1.0) * limit);
    return;
  }
  const double fan = init.mode == FanMode::fan_in    ? fans.in
                     : init.mode == FanMode::fan_out ? fans.out
                                                     : (fans.in + fans.out) / 2.0;
  const double variance = init.scale / std::max(1.0, fan);
  const bool cut = init.distribution == Distribution::truncated_normal;
  const double stddev = cut ? std::sqrt(variance) / kTruncatedNormalStddev : std::sqrt(variance);
  for (int64_t e = 0; e < n; ++e)
    out[static_cast<std::size_t>(e)] =
        static_cast<float>(stddev * standard_normal(key, static_cast<uint64_t>(e), cut));
}
}  // namespace

}  // namespace crossover
