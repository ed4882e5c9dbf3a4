// Permute and RepeatVector: each sample's values moved, none changed. Permute reorders a sample's
// axes (Backend::permute; its backward the inverse permutation). RepeatVector copies a flat sample
// n times (Backend::copy_columns, doubling the copies made each call); its backward sums the n
// copies' gradients: the (n, features) gradient permuted to (features, n), then Backend::row_sum.
// Every backend has those calls. No weights.
#include "nn/layers/permute.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>
#include <utility>

#include "core/error.h"
#include "nn/layers/kind.h"

namespace crossover {
namespace {

// What is wrong with dims as Permute's argument (Keras's check and message,
// keras/src/layers/reshaping/permute.py, plus the engine's limit on the rank); empty when nothing.
std::string permutation_problem(const std::vector<int64_t>& dims) {
  std::vector<int64_t> sorted = dims;
  std::sort(sorted.begin(), sorted.end());
  bool consecutive = !dims.empty();
  for (std::size_t i = 0; i < sorted.size(); ++i)
    consecutive = consecutive && sorted[i] == static_cast<int64_t>(i) + 1;
  if (!consecutive)
    return fmt::format(
        "Invalid permutation argument `dims` for Permute Layer. The set of indices in `dims` must "
        "be consecutive and start from 1. Received dims=({})",
        fmt::join(dims, ", "));
  if (dims.size() > static_cast<std::size_t>(PermuteShape::kMaxRank))
    return fmt::format("dims ({}) permutes {} axes; the engine permutes at most {}",
                       fmt::join(dims, ", "), dims.size(), PermuteShape::kMaxRank);
  return {};
}

void require_repeats(int64_t n, const std::string& where) {
  if (n < 1 || n > keras_config::kMaxDim)
    throw Error(where, fmt::format("Argument `n` should be a positive integer. Received: n={}", n));
}

}  // namespace

Layer Permute(std::vector<int64_t> dims) {
  if (const std::string why = permutation_problem(dims); !why.empty()) throw Error("Permute", why);
  Layer l;
  l.type = LayerType::permute;
  l.args<PermuteArgs>().dims = std::move(dims);
  return l;
}

Layer RepeatVector(int64_t n) {
  require_repeats(n, "RepeatVector");
  Layer l;
  l.type = LayerType::repeat_vector;
  l.args<RepeatVectorArgs>().n = n;
  return l;
}

namespace {

using namespace keras_config;

class PermuteKind final : public LayerKind {
 public:
  LayerType type() const override { return LayerType::permute; }
  std::string_view class_name() const override { return "Permute"; }
  std::string_view base_name() const override { return "permute"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    using keras_config::required;
    return keras_config::Arguments{required("dims", {2, 1})};
  }
  // Keras 3.15 writes one (its InputSpec checks the input's rank when it builds).
  bool keras_build_config() const override { return true; }

  // ---- command line: permute:DIMS ----
  std::string_view cli_name() const override { return "permute"; }
  std::string_view cli_syntax() const override { return "permute:DIMS"; }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (f.size() != 2) return std::nullopt;
    return Permute(f.dims(1));
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    j["dims"] = l.args<PermuteArgs>().dims;
  }

  // ---- Keras config: dims ----
  void from_keras(Reader& cfg, Layer& l) const override {
    const json* d = cfg.find("dims");
    if (d == nullptr || !d->is_array() || d->empty())
      cfg.fail("dims", "Permute needs dims, a list such as [2, 1]");
    std::vector<int64_t>& dims = l.args<PermuteArgs>().dims;
    for (const json& v : *d) {
      if (!v.is_number_integer())
        cfg.fail("dims", "expected a list of whole numbers (1-based axes), got " + brief(*d));
      dims.push_back(v.get<int64_t>());
    }
    if (const std::string why = permutation_problem(dims); !why.empty()) cfg.fail("dims", why);
  }
  void to_keras(const Layer& l, ojson& c) const override { c["dims"] = l.args<PermuteArgs>().dims; }

  // ---- engine ----
  void build(LayerBuilder& b) const override {
    const Layer& l = b.layer;
    const std::vector<int64_t>& dims = l.args<PermuteArgs>().dims;
    if (b.shape.size() != dims.size())
      throw Error(l.name,
                  fmt::format("Permute with dims ({}) permutes samples of {} axes, but receives "
                              "samples of shape {} ({} axes)",
                              fmt::join(dims, ", "), dims.size(), shape_to_string(b.shape),
                              b.shape.size()));
    PermuteShape& p = b.state.own<PermuteShape>();
    p.rank = static_cast<int>(dims.size());
    Shape out(dims.size());
    for (int i = 0; i < p.rank; ++i) {
      p.in[i] = b.shape[static_cast<std::size_t>(i)];
      p.perm[i] = static_cast<int>(dims[static_cast<std::size_t>(i)] - 1);
      out[static_cast<std::size_t>(i)] = b.shape[static_cast<std::size_t>(p.perm[i])];
    }
    b.shape = out;
  }
  // y (m, permuted shape) = x with each sample's axes permuted.
  void forward(const ForwardStep& s) const override {
    s.backend.permute(s.state.own<PermuteShape>(), s.x, s.y, s.m);
  }
  // dx (into the spare buffer): the gradient permuted back.
  void backward(BackwardStep& s) const override {
    s.backend.permute(inverse_permutation(s.state.own<PermuteShape>()), s.g, s.spare, s.m);
    s.swap();
    s.activation_done = false;
  }
};

class RepeatVectorKind final : public LayerKind {
 public:
  LayerType type() const override { return LayerType::repeat_vector; }
  std::string_view class_name() const override { return "RepeatVector"; }
  std::string_view base_name() const override { return "repeat_vector"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    using keras_config::required;
    return keras_config::Arguments{required("n", 3)};
  }
  bool keras_build_config() const override { return true; }

  // ---- command line: repeat:N ----
  std::string_view cli_name() const override { return "repeat"; }
  std::string_view cli_syntax() const override { return "repeat:N"; }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (f.size() != 2) return std::nullopt;
    return RepeatVector(f.whole(1));
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    j["n"] = l.args<RepeatVectorArgs>().n;
  }

  // ---- Keras config: n ----
  void from_keras(Reader& cfg, Layer& l) const override {
    l.args<RepeatVectorArgs>().n = cfg.count("n", "RepeatVector needs n, a whole number >= 1");
  }
  void to_keras(const Layer& l, ojson& c) const override { c["n"] = l.args<RepeatVectorArgs>().n; }

  // ---- engine ----
  void build(LayerBuilder& b) const override {
    const Layer& l = b.layer;
    const int64_t n = l.args<RepeatVectorArgs>().n;
    if (b.shape.size() != 1)
      throw Error(l.name,
                  "RepeatVector repeats flat samples (features), but receives samples of "
                  "shape " +
                      shape_to_string(b.shape) + ": add Flatten() before it");
    const int64_t features = b.shape[0];
    if (n > kMaxElements / std::max<int64_t>(features, 1))
      throw Error(l.name,
                  fmt::format("RepeatVector({}) of {} features is past 2^40 values", n, features));
    // The backward's view of the gradient: (n, features) -> (features, n).
    PermuteShape& p = b.state.own<PermuteShape>();
    p.rank = 2;
    p.in[0] = n, p.in[1] = features;
    p.perm[0] = 1, p.perm[1] = 0;
    b.shape = {n, features};
  }
  // y (m, n, features): x copied into the first features columns, then the copies made so far
  // copied after them (1, 2, 4, ... copies a call) until there are n.
  void forward(const ForwardStep& s) const override {
    const int64_t n = s.state.own<PermuteShape>().in[0], f = s.state.own<PermuteShape>().in[1];
    s.backend.copy_columns(s.x, f, 0, s.y, n * f, 0, s.m, f);
    for (int64_t made = 1; made < n;) {
      const int64_t more = std::min(made, n - made);
      s.backend.copy_columns(s.y, n * f, 0, s.y, n * f, made * f, s.m, more * f);
      made += more;
    }
  }
  // dx (m, features) = the sum over the n copies of g (m, n, features): g permuted to (m,
  // features, n) in the spare buffer, each row of n summed back into g.
  void backward(BackwardStep& s) const override {
    const int64_t n = s.state.own<PermuteShape>().in[0], f = s.state.own<PermuteShape>().in[1];
    s.backend.permute(s.state.own<PermuteShape>(), s.g, s.spare, s.m);
    s.backend.row_sum(s.spare, s.g, s.m * f, n, 1.0f);
    s.activation_done = false;
  }
};

}  // namespace

const LayerKind& permute_layer_kind() {
  static const PermuteKind kind;
  return kind;
}

const LayerKind& repeat_vector_layer_kind() {
  static const RepeatVectorKind kind;
  return kind;
}

}  // namespace crossover
