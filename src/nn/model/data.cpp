// The data: x, y and sample weights checked and put where the steps read them.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <numeric>

#include "backends/losses/list.h"
#include "core/error.h"
#include "nn/device_memory.h"
#include "nn/model/impl.h"

namespace crossover {

void Sequential::Impl::check_xy(const Tensor& x, const Tensor& y, const char* who) const {
  if (x.rank() < 2)
    throw Error(who, "x must have shape (samples, features...), got " + shape_to_string(x.shape()));
  if (!losses.heads.empty()) return check_packed_targets(y, x.dim(0), who);
  check_targets(y, x.dim(0), who, losses.loss.kind, losses.loss_name);
}

void Sequential::Impl::check_packed_targets(const Tensor& y, int64_t n, const char* who) const {
  const int64_t cols = losses.target_columns();
  if (!(y.rank() == 2 && y.dim(0) == n && y.dim(1) == cols))
    throw Error(who, fmt::format("y must hold the targets of the model's {} outputs side by "
                                 "side, shape ({}, {}), got {}",
                                 losses.heads.size(), n, cols, shape_to_string(y.shape())));
  for (std::size_t j = 0; j < losses.heads.size(); ++j) {
    const LossHead& h = losses.heads[j];
    if (!loss_rules(h.loss.kind).class_index_targets) continue;
    const int64_t c = losses.head_width(h), col = losses.head_target_column(j);
    for (int64_t i = 0; i < n; ++i) {
      const float v = y[i * cols + col];
      if (!(v >= 0.0f && v < static_cast<float>(c)) || v != std::floor(v))
        throw Error(who,
                    fmt::format("label {} at index {} of output '{}' is not a class index "
                                "in 0..{}",
                                v, i, graph.layers[static_cast<std::size_t>(h.layer)].name, c - 1));
    }
  }
}

void Sequential::Impl::check_targets(const Tensor& y, int64_t n, const char* who, LossKind kind,
                                     const std::string& kind_name) const {
  const int64_t c = output_width();
  if (loss_rules(kind).class_index_targets) {
    if (!(y.rank() == 1 || (y.rank() == 2 && y.dim(1) == 1)) || y.dim(0) != n)
      throw Error(who, "y must hold one class index per sample, shape (" + std::to_string(n) +
                           ",), got " + shape_to_string(y.shape()));
    for (int64_t i = 0; i < n; ++i) {
      const float v = y[i];
      if (!(v >= 0.0f && v < static_cast<float>(c)) || v != std::floor(v))
        throw Error(who,
                    fmt::format("label {} at index {} is not a class index in 0..{}", v, i, c - 1));
    }
  } else if (!targets_fit_output(y, n)) {
    Shape want = {n};
    want.insert(want.end(), layers_output_shape().begin(), layers_output_shape().end());
    throw Error(who, "y must have shape " + shape_to_string(want) + " for " + kind_name +
                         " (the model's output), got " + shape_to_string(y.shape()));
  }
}

bool Sequential::Impl::targets_fit_output(const Tensor& y, int64_t n) const {
  if (y.rank() < 1 || y.dim(0) != n) return false;
  const Shape sample(y.shape().begin() + 1, y.shape().end());
  Shape out = layers_output_shape();
  if (sample == out) return true;
  if (sample.size() + 1 == out.size() && out.back() == 1)
    return std::equal(sample.begin(), sample.end(), out.begin());
  out.push_back(1);
  return sample == out;
}

Sequential::Impl::DeviceData Sequential::Impl::upload_data(const Tensor& x, const Tensor& y,
                                                           int64_t begin, int64_t end,
                                                           const Tensor* w) {
  DeviceData d;
  d.n = end - begin;
  d.x_cols = input_width();
  d.y_cols = losses.target_columns();
  const float* x_src = x.data() + begin * d.x_cols;
  const float* y_src = y.data() + begin * d.y_cols;
  // The CPU reads the caller's rows where they are: no copy of the data set per call.
  const bool in_place = backend->reads_host_memory();
  check_fits(*backend, graph.name,
             (in_place ? 0.0 : float_bytes(d.n * d.x_cols) + float_bytes(d.n * d.y_cols)) +
                 float_bytes(d.n),
             "the data (" + std::to_string(d.n) + " samples, copied to the device once)", "");
  if (in_place) {
    d.x_rows = x_src;
    d.y_rows = y_src;
  } else {
    d.x =
        DeviceBlock(*backend, static_cast<std::size_t>(std::max<int64_t>(d.n * d.x_cols, 16)) * 4);
    d.y =
        DeviceBlock(*backend, static_cast<std::size_t>(std::max<int64_t>(d.n * d.y_cols, 16)) * 4);
    backend->upload(d.x.as<void>(), x_src,
                    static_cast<std::size_t>(d.n * d.x_cols) * sizeof(float));
    backend->upload(d.y.as<void>(), y_src,
                    static_cast<std::size_t>(d.n * d.y_cols) * sizeof(float));
    d.x_rows = d.x.as<float>();
    d.y_rows = d.y.as<float>();
  }
  if (w) upload_weights(d, *w, begin, in_place);
  d.indices = DeviceBlock(*backend, static_cast<std::size_t>(std::max<int64_t>(d.n, 16)) * 4);
  std::vector<int32_t> iota(static_cast<std::size_t>(d.n));
  std::iota(iota.begin(), iota.end(), 0);
  backend->upload(d.indices.as<void>(), iota.data(), iota.size() * sizeof(int32_t));
  return d;
}

void Sequential::Impl::upload_weights(DeviceData& d, const Tensor& w, int64_t begin,
                                      bool in_place) {
  if (in_place) {
    d.w_rows = w.data() + begin;
    return;
  }
  d.w = DeviceBlock(*backend, static_cast<std::size_t>(std::max<int64_t>(d.n, 16)) * 4);
  backend->upload(d.w.as<void>(), w.data() + begin, static_cast<std::size_t>(d.n) * 4);
  d.w_rows = d.w.as<float>();
}

void Sequential::Impl::check_weights(const Tensor& w, int64_t n, const char* who,
                                     const char* what) {
  if (!((w.rank() == 1 || (w.rank() == 2 && w.dim(1) == 1)) && w.dim(0) == n))
    throw Error(who, fmt::format("{} must hold one weight per sample, shape ({},), got {}", what, n,
                                 shape_to_string(w.shape())));
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(w[i]))
      throw Error(who, fmt::format("{} {} at index {} is not a finite number", what, w[i], i));
}

Tensor Sequential::Impl::class_weight_samples(const Tensor& y,
                                              const std::map<int64_t, double>& class_weight,
                                              int64_t n) const {
  Tensor w({n});
  const int64_t cols = y.rank() == 2 ? y.dim(1) : 1;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = y.data() + i * cols;
    // np.argmax's first largest; np.round's ties to even (nearbyint's default mode).
    const int64_t cls = cols > 1
                            ? std::max_element(row, row + cols) - row
                            : static_cast<int64_t>(std::nearbyint(static_cast<double>(row[0])));
    const auto it = class_weight.find(cls);
    w[i] = it == class_weight.end() ? 1.0f : static_cast<float>(it->second);
  }
  return w;
}

void Sequential::Impl::require_compiled(const char* who) const {
  if (!is_compiled) throw Error(who, "the model must be compiled first: call compile()");
}

void Sequential::Impl::require_one_output(const char* who) const {
  if (graph.several_outputs())
    throw Error(who, fmt::format("takes a model of one output; this one has {} (not "
                                 "supported (yet))",
                                 graph.model_outputs.size()));
}

Shape Sequential::Impl::sample_shape_of(const Tensor& x) const {
  return Shape(x.shape().begin() + 1, x.shape().end());
}

void Sequential::Impl::check_fit_options(const FitOptions& o) {
  if (o.epochs < 0) throw Error("fit", "epochs must not be negative");
  if (o.batch_size < 1) throw Error("fit", "batch_size must be at least 1");
  if (!(o.validation_split >= 0.0 && o.validation_split < 1.0))
    throw Error("fit", "validation_split must be in [0, 1)");
  if ((o.validation_x == nullptr) != (o.validation_y == nullptr))
    throw Error("fit", "validation_data needs both x and y");
  if (o.validation_freq < 1) throw Error("fit", "validation_freq must be at least 1");
}

Tensor Sequential::Impl::fit_weights(const Tensor& x, const Tensor& y, const FitOptions& o) const {
  if (o.sample_weight && !o.class_weight.empty())
    throw Error("fit", "you cannot give class_weight and sample_weight at the same time");
  if (o.sample_weight) check_weights(*o.sample_weight, x.dim(0), "fit", "sample_weight");
  if (o.validation_sample_weight && !o.validation_x)
    throw Error("fit", "validation_data's sample_weight needs validation_data's x and y");
  for (const auto& [cls, weight] : o.class_weight)
    if (!std::isfinite(weight))
      throw Error("fit",
                  fmt::format("class_weight {} of class {} is not a finite number", weight, cls));
  if (o.class_weight.empty()) return Tensor();
  return class_weight_samples(y, o.class_weight, x.dim(0));
}

Sequential::Impl::FitData Sequential::Impl::fit_data(const Tensor& x, const Tensor& y,
                                                     const FitOptions& o,
                                                     const Tensor* train_weights) {
  FitData f;
  const int64_t n_all = x.dim(0);
  f.n_train = n_all;
  if (o.validation_split > 0.0)
    f.n_train =
        static_cast<int64_t>(std::ceil(static_cast<double>(n_all) * (1.0 - o.validation_split)));
  if (f.n_train < 1)
    throw Error("fit", "no training samples (x has " + std::to_string(n_all) + ")");
  f.train = upload_data(x, y, 0, f.n_train, train_weights);
  f.batch = std::min<int64_t>(o.batch_size, f.n_train);
  // The validation rows: validation_data, or the last rows of (x, y) (validation_split); with
  // validation_steps, the rows its first batches hold.
  const Tensor& vx = o.validation_x ? *o.validation_x : x;
  const Tensor& vy = o.validation_x ? *o.validation_y : y;
  const int64_t begin = o.validation_x ? 0 : f.n_train;
  const Tensor* vw = o.validation_x ? o.validation_sample_weight : o.sample_weight;
  if (o.validation_x) {
    build(sample_shape_of(vx));
    check_xy(vx, vy, "fit (validation_data)");
    if (vw) check_weights(*vw, vx.dim(0), "fit", "validation_data's sample_weight");
  }
  f.validate = o.validation_x || f.n_train < n_all;
  if (!f.validate) return f;
  if (o.validation_steps && *o.validation_steps < 1)
    throw Error("fit", "validation_steps must be at least 1");
  int64_t end = vx.dim(0);
  if (o.validation_steps) end = std::min(end, begin + *o.validation_steps * f.batch);
  f.val = split_data(vx, vy, begin, end, vw);
  return f;
}

std::optional<Sequential::Impl::DeviceData> Sequential::Impl::split_data(const Tensor& x,
                                                                         const Tensor& y,
                                                                         int64_t begin, int64_t end,
                                                                         const Tensor* w) {
  const RowRange share = rank_rows(end - begin, rank(), ranks());
  if (share.count() == 0) return std::nullopt;
  return upload_data(x, y, begin + share.begin, begin + share.end, w);
}

}  // namespace crossover
