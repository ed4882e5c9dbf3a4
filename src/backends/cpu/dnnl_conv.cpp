#include "backends/cpu/dnnl_conv.h"

#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "backends/cpu/dnnl_exec.h"
#include "core/error.h"

namespace crossover::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr memory::data_type kF32 = memory::data_type::f32;

// oneDNN 2.3 split batch normalization's scale and shift into two arguments. Before it (Debian
// 11's oneDNN 2.0, which the wheel carries: docs/SETUP.md) both live in one 2 x C block, which the
// backend owns and fills from the layer's gamma and beta before each run, and whose gradient it
// splits after.
#if DNNL_VERSION_MAJOR > 2 || (DNNL_VERSION_MAJOR == 2 && DNNL_VERSION_MINOR >= 3)
#define CROSSOVER_DNNL_SPLIT_SCALE_SHIFT 1
#else
#define CROSSOVER_DNNL_SPLIT_SCALE_SHIFT 0
#endif

memory::dims nchw_dims(int64_t n, int64_t c, int64_t h, int64_t w) { return {n, c, h, w}; }

// The primitives of one convolution at one batch size.
struct ConvForward {
  Exec reorder_w;  // Keras's hwio kernel -> the convolution's layout (empty when the same)
  Exec conv;       // x, w, (b), y, scratchpad
  bool reorder = false;
  bool bias = false;
};
struct ConvBackwardInput {
  Exec reorder_w;
  Exec conv;  // dy, w, dx, scratchpad
  bool reorder = false;
};
struct ConvBackwardWeights {
  Exec conv;       // x, dy, dw, (db), scratchpad
  Exec reorder_w;  // the convolution's dw layout -> Keras's hwio (empty when the same)
  bool reorder = false;
  bool bias = false;
};
// One batch-normalization primitive; each argument's index in its Exec (-1: not an argument).
struct BatchNorm {
  Exec norm;
  int x = -1, y = -1, mean = -1, variance = -1, scale = -1, shift = -1;
  int dy = -1, dx = -1, dscale = -1, dshift = -1;
  // Before oneDNN 2.3: the joint scale-shift block and its gradient (channels each half).
  float* scale_shift = nullptr;
  float* diff_scale_shift = nullptr;
  int64_t channels = 0;
  bool has_scale = false, has_shift = false;
  void point(int i, const void* p) {
    if (i >= 0) norm.point(static_cast<std::size_t>(i), p);
  }
  void set_weights(const float* gamma, const float* beta) {
    if (!scale_shift) return point(scale, gamma), point(shift, beta);
    for (int64_t c = 0; c < channels; ++c) {
      scale_shift[c] = has_scale ? gamma[c] : 1.0f;
      scale_shift[channels + c] = has_shift && beta ? beta[c] : 0.0f;  // backward: no beta
    }
  }
  void point_gradients(float* dgamma, float* dbeta) {
    if (!scale_shift) point(dscale, dgamma), point(dshift, dbeta);
  }
  void take_gradients(float* dgamma, float* dbeta) const {
    if (!diff_scale_shift) return;
    for (int64_t c = 0; c < channels; ++c) {
      if (has_scale) dgamma[c] = diff_scale_shift[c];
      if (has_shift) dbeta[c] = diff_scale_shift[channels + c];
    }
  }
};
enum class NormPass { training, inference, backward };

}  // namespace

struct DnnlConv::State {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<std::tuple<ConvShape, int64_t, bool, bool>, ConvForward> forward;  // relu, bias
  std::map<std::tuple<ConvShape, int64_t>, ConvBackwardInput> backward_input;
  std::map<std::tuple<ConvShape, int64_t, bool>, ConvBackwardWeights> backward_weights;
  std::map<std::tuple<BatchNormShape, int64_t, NormPass>, BatchNorm> batch_norm;

  dnnl::primitive_attr attr(bool relu) const {
    dnnl::primitive_attr a;
    a.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // ours, made with the primitive
    if (relu) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      a.set_post_ops(ops);
    }
    return a;
  }

  struct ConvDescs {
    memory::desc x, w_user, w_any, b, y;
    memory::dims strides, dilates, pad_l, pad_r;
  };
  static ConvDescs conv_descs(const ConvShape& s, int64_t m) {
    ConvDescs d;
    d.x = memory::desc(nchw_dims(m, s.in_c, s.in_h, s.in_w), kF32, Tag::nhwc);
    d.y = memory::desc(nchw_dims(m, s.out_c, s.out_h, s.out_w), kF32, Tag::nhwc);
    const memory::dims wd = {s.out_c, s.in_c, s.kernel_h, s.kernel_w};
    d.w_user = memory::desc(wd, kF32, Tag::hwio);  // Keras: (kh, kw, in, out)
    d.w_any = memory::desc(wd, kF32, Tag::any);
    d.b = memory::desc({s.out_c}, kF32, Tag::x);
    d.strides = {s.stride_h, s.stride_w};
    d.dilates = {s.dilation_h - 1, s.dilation_w - 1};  // oneDNN counts the gaps: 0 is dense
    d.pad_l = {s.pad_top, s.pad_left};
    d.pad_r = {s.pad_bottom, s.pad_right};
    return d;
  }

  dnnl::convolution_forward::primitive_desc forward_pd(const ConvShape& s, int64_t m, bool bias,
                                                       bool relu) const {
    const ConvDescs d = conv_descs(s, m);
    const dnnl::convolution_forward::desc desc =
        bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                               dnnl::algorithm::convolution_direct, d.x, d.w_any,
                                               d.b, d.y, d.strides, d.dilates, d.pad_l, d.pad_r)
             : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                               dnnl::algorithm::convolution_direct, d.x, d.w_any,
                                               d.y, d.strides, d.dilates, d.pad_l, d.pad_r);
    return {desc, attr(relu), engine};
  }

  // A reorder of `from` into `to`, with memory objects for both pointed at later (or owned).
  Exec reorder(const memory::desc& from, const memory::desc& to) const {
    Exec e;
    e.primitive = dnnl::reorder(dnnl::reorder::primitive_desc(engine, from, engine, to));
    return e;
  }

  ConvForward& forward_for(const ConvShape& s, int64_t m, bool bias, bool relu) {
    const auto key = std::tuple(s, m, relu, bias);
    if (auto it = forward.find(key); it != forward.end()) return it->second;
    const ConvDescs d = conv_descs(s, m);
    const auto pd = forward_pd(s, m, bias, relu);
    ConvForward f;
    f.bias = bias;
    f.reorder = pd.weights_desc() != d.w_user;
    f.conv.primitive = dnnl::convolution_forward(pd);
    f.conv.add(DNNL_ARG_SRC, d.x, engine);
    if (f.reorder) {
      f.conv.add_owned(DNNL_ARG_WEIGHTS, pd.weights_desc(), engine);
      f.reorder_w = reorder(d.w_user, pd.weights_desc());
      f.reorder_w.add(DNNL_ARG_FROM, d.w_user, engine);
      f.reorder_w.add(DNNL_ARG_TO, pd.weights_desc(), engine);
      f.reorder_w.point(1, f.conv.owned.back().get());
    } else {
      f.conv.add(DNNL_ARG_WEIGHTS, d.w_user, engine);
    }
    if (bias) f.conv.add(DNNL_ARG_BIAS, d.b, engine);
    f.conv.add(DNNL_ARG_DST, d.y, engine);
    f.conv.add_owned(DNNL_ARG_SCRATCHPAD, pd.scratchpad_desc(), engine);
    return forward.emplace(key, std::move(f)).first->second;
  }

  ConvBackwardInput& backward_input_for(const ConvShape& s, int64_t m) {
    const auto key = std::tuple(s, m);
    if (auto it = backward_input.find(key); it != backward_input.end()) return it->second;
    const ConvDescs d = conv_descs(s, m);
    const auto hint = forward_pd(s, m, false, false);
    dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, d.x, d.w_any,
                                               d.y, d.strides, d.dilates, d.pad_l, d.pad_r);
    dnnl::convolution_backward_data::primitive_desc pd(desc, attr(false), engine, hint);
    ConvBackwardInput b;
    b.reorder = pd.weights_desc() != d.w_user;
    b.conv.primitive = dnnl::convolution_backward_data(pd);
    b.conv.add(DNNL_ARG_DIFF_DST, d.y, engine);
    if (b.reorder) {
      b.conv.add_owned(DNNL_ARG_WEIGHTS, pd.weights_desc(), engine);
      b.reorder_w = reorder(d.w_user, pd.weights_desc());
      b.reorder_w.add(DNNL_ARG_FROM, d.w_user, engine);
      b.reorder_w.add(DNNL_ARG_TO, pd.weights_desc(), engine);
      b.reorder_w.point(1, b.conv.owned.back().get());
    } else {
      b.conv.add(DNNL_ARG_WEIGHTS, d.w_user, engine);
    }
    b.conv.add(DNNL_ARG_DIFF_SRC, d.x, engine);
    b.conv.add_owned(DNNL_ARG_SCRATCHPAD, pd.scratchpad_desc(), engine);
    return backward_input.emplace(key, std::move(b)).first->second;
  }

  ConvBackwardWeights& backward_weights_for(const ConvShape& s, int64_t m, bool bias) {
    const auto key = std::tuple(s, m, bias);
    if (auto it = backward_weights.find(key); it != backward_weights.end()) return it->second;
    const ConvDescs d = conv_descs(s, m);
    const auto hint = forward_pd(s, m, bias, false);
    const dnnl::convolution_backward_weights::desc desc =
        bias ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, d.x,
                                                        d.w_any, d.b, d.y, d.strides, d.dilates,
                                                        d.pad_l, d.pad_r)
             : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, d.x,
                                                        d.w_any, d.y, d.strides, d.dilates, d.pad_l,
                                                        d.pad_r);
    dnnl::convolution_backward_weights::primitive_desc pd(desc, attr(false), engine, hint);
    ConvBackwardWeights b;
    b.bias = bias;
    b.reorder = pd.diff_weights_desc() != d.w_user;
    b.conv.primitive = dnnl::convolution_backward_weights(pd);
    b.conv.add(DNNL_ARG_SRC, d.x, engine);
    b.conv.add(DNNL_ARG_DIFF_DST, d.y, engine);
    if (b.reorder) {
      b.conv.add_owned(DNNL_ARG_DIFF_WEIGHTS, pd.diff_weights_desc(), engine);
      b.reorder_w = reorder(pd.diff_weights_desc(), d.w_user);
      b.reorder_w.add(DNNL_ARG_FROM, pd.diff_weights_desc(), engine);
      b.reorder_w.point(0, b.conv.owned.back().get());
      b.reorder_w.add(DNNL_ARG_TO, d.w_user, engine);
    } else {
      b.conv.add(DNNL_ARG_DIFF_WEIGHTS, d.w_user, engine);
    }
    if (bias) b.conv.add(DNNL_ARG_DIFF_BIAS, d.b, engine);
    b.conv.add_owned(DNNL_ARG_SCRATCHPAD, pd.scratchpad_desc(), engine);
    return backward_weights.emplace(key, std::move(b)).first->second;
  }

  dnnl::normalization_flags norm_flags(const BatchNormShape& s, bool global_stats) const {
    auto f = static_cast<dnnl::normalization_flags>(0);
    if (global_stats) f |= dnnl::normalization_flags::use_global_stats;
#if CROSSOVER_DNNL_SPLIT_SCALE_SHIFT
    if (s.scale) f |= dnnl::normalization_flags::use_scale;
    if (s.center) f |= dnnl::normalization_flags::use_shift;
#else
    if (s.scale || s.center) f |= dnnl::normalization_flags::use_scale_shift;
#endif
    return f;
  }
  static memory::desc norm_data(const BatchNormShape& s, int64_t m) {
    return memory::desc(nchw_dims(m, s.channels, s.spatial, 1), kF32, Tag::nhwc);
  }
  dnnl::batch_normalization_forward::primitive_desc norm_forward_pd(const BatchNormShape& s,
                                                                    int64_t m,
                                                                    bool training) const {
    dnnl::batch_normalization_forward::desc desc(
        training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference,
        norm_data(s, m), s.epsilon, norm_flags(s, !training));
    return {desc, attr(false), engine};
  }

  // A 2 x channels block that the primitive reads or writes as `arg`, owned by b (oneDNN < 2.3).
  [[maybe_unused]] float* owned_floats(BatchNorm& b, int arg, int64_t channels) const {
    b.norm.add_owned(arg, memory::desc({2, channels}, kF32, Tag::nc), engine);
    return static_cast<float*>(b.norm.owned.back().get());
  }

  BatchNorm& batch_norm_for(const BatchNormShape& s, int64_t m, NormPass pass) {
    const auto key = std::tuple(s, m, pass);
    if (auto it = batch_norm.find(key); it != batch_norm.end()) return it->second;
    const memory::desc data = norm_data(s, m);
    const memory::desc channels({s.channels}, kF32, Tag::x);
    BatchNorm b;
    auto add = [&](int arg, const memory::desc& md) {
      b.norm.add(arg, md, engine);
      return static_cast<int>(b.norm.memories.size()) - 1;
    };
    const auto fwd = norm_forward_pd(s, m, pass != NormPass::inference);
    memory::desc scratchpad = fwd.scratchpad_desc();
    if (pass == NormPass::backward) {
      const bool weights = s.scale || s.center;
      dnnl::batch_normalization_backward::desc desc(
          weights ? dnnl::prop_kind::backward : dnnl::prop_kind::backward_data, data, data,
          s.epsilon, norm_flags(s, false));
      dnnl::batch_normalization_backward::primitive_desc pd(desc, attr(false), engine, fwd);
      b.norm.primitive = dnnl::batch_normalization_backward(pd);
      scratchpad = pd.scratchpad_desc();
      b.dy = add(DNNL_ARG_DIFF_DST, data);
      b.dx = add(DNNL_ARG_DIFF_SRC, data);
#if CROSSOVER_DNNL_SPLIT_SCALE_SHIFT
      if (s.scale) b.dscale = add(DNNL_ARG_DIFF_SCALE, channels);
      if (s.center) b.dshift = add(DNNL_ARG_DIFF_SHIFT, channels);
#else
      if (weights) b.diff_scale_shift = owned_floats(b, DNNL_ARG_DIFF_SCALE_SHIFT, s.channels);
#endif
    } else {
      b.norm.primitive = dnnl::batch_normalization_forward(fwd);
      b.y = add(DNNL_ARG_DST, data);
    }
    b.x = add(DNNL_ARG_SRC, data);
    b.mean = add(DNNL_ARG_MEAN, channels);
    b.variance = add(DNNL_ARG_VARIANCE, channels);
#if CROSSOVER_DNNL_SPLIT_SCALE_SHIFT
    if (s.scale) b.scale = add(DNNL_ARG_SCALE, channels);
    if (s.center && pass != NormPass::backward) b.shift = add(DNNL_ARG_SHIFT, channels);
    // oneDNN 2.6's backward asks for the shift as an input too, though no gradient depends on
    // it: a block of its own.
    if (s.center && pass == NormPass::backward) b.norm.add_owned(DNNL_ARG_SHIFT, channels, engine);
#else
    if (s.scale || s.center) b.scale_shift = owned_floats(b, DNNL_ARG_SCALE_SHIFT, s.channels);
#endif
    b.channels = s.channels;
    b.has_scale = s.scale;
    b.has_shift = s.center;
    b.norm.add_owned(DNNL_ARG_SCRATCHPAD, scratchpad, engine);
    return batch_norm.emplace(key, std::move(b)).first->second;
  }
};

DnnlConv::DnnlConv() = default;
DnnlConv::~DnnlConv() = default;

DnnlConv::State& DnnlConv::state() {
  if (!state_) state_ = guarded("engine", [] { return std::make_unique<State>(); });
  return *state_;
}

void DnnlConv::conv_forward(const ConvShape& s, const float* x, const float* w, const float* b,
                            float* y, int64_t m, ActivationKind act) {
  if (act != ActivationKind::linear && act != ActivationKind::relu)
    throw Error("cpu", "conv2d_forward fuses linear or relu only");
  ConvForward& f = guarded("convolution", [&]() -> ConvForward& {
    return state().forward_for(s, m, b != nullptr, act == ActivationKind::relu);
  });
  std::size_t i = 0;
  f.conv.point(i++, x);
  if (f.reorder) {
    f.reorder_w.point(0, w);
    f.reorder_w.run(state().stream);
  } else {
    f.conv.point(i, w);
  }
  ++i;
  if (f.bias) f.conv.point(i++, b);
  f.conv.point(i, y);
  f.conv.run(state().stream);
}

void DnnlConv::conv_backward_input(const ConvShape& s, const float* dy, const float* w, float* dx,
                                   int64_t m) {
  ConvBackwardInput& b = guarded("convolution backward data", [&]() -> ConvBackwardInput& {
    return state().backward_input_for(s, m);
  });
  b.conv.point(0, dy);
  if (b.reorder) {
    b.reorder_w.point(0, w);
    b.reorder_w.run(state().stream);
  } else {
    b.conv.point(1, w);
  }
  b.conv.point(2, dx);
  b.conv.run(state().stream);
}

void DnnlConv::conv_backward_weights(const ConvShape& s, const float* x, const float* dy, float* dw,
                                     float* db, int64_t m) {
  ConvBackwardWeights& b = guarded("convolution backward weights", [&]() -> ConvBackwardWeights& {
    return state().backward_weights_for(s, m, db != nullptr);
  });
  b.conv.point(0, x);
  b.conv.point(1, dy);
  if (b.reorder)
    b.reorder_w.point(1, dw);
  else
    b.conv.point(2, dw);
  if (b.bias) b.conv.point(3, db);
  b.conv.run(state().stream);
  if (b.reorder) b.reorder_w.run(state().stream);
}

void DnnlConv::batchnorm_prepare(const BatchNormShape& s, int64_t m) {
  guarded("batch normalization", [&] {
    for (NormPass pass : {NormPass::training, NormPass::inference, NormPass::backward})
      state().batch_norm_for(s, m, pass);
  });
}

void DnnlConv::batchnorm_forward_training(const BatchNormShape& s, const float* x,
                                          const float* gamma, const float* beta, float* y,
                                          float* mean, float* variance, int64_t m) {
  BatchNorm& b = guarded("batch normalization", [&]() -> BatchNorm& {
    return state().batch_norm_for(s, m, NormPass::training);
  });
  b.point(b.x, x), b.point(b.y, y), b.point(b.mean, mean), b.point(b.variance, variance);
  b.set_weights(gamma, beta);
  b.norm.run(state().stream);
}

void DnnlConv::batchnorm_forward_inference(const BatchNormShape& s, const float* x,
                                           const float* gamma, const float* beta, const float* mean,
                                           const float* variance, float* y, int64_t m) {
  BatchNorm& b = guarded("batch normalization", [&]() -> BatchNorm& {
    return state().batch_norm_for(s, m, NormPass::inference);
  });
  b.point(b.x, x), b.point(b.y, y), b.point(b.mean, mean), b.point(b.variance, variance);
  b.set_weights(gamma, beta);
  b.norm.run(state().stream);
}

void DnnlConv::batchnorm_backward(const BatchNormShape& s, const float* x, const float* dy,
                                  const float* gamma, const float* mean, const float* variance,
                                  float* dx, float* dgamma, float* dbeta, int64_t m) {
  BatchNorm& b = guarded("batch normalization backward", [&]() -> BatchNorm& {
    return state().batch_norm_for(s, m, NormPass::backward);
  });
  b.point(b.x, x), b.point(b.dy, dy), b.point(b.mean, mean), b.point(b.variance, variance);
  b.set_weights(gamma, nullptr);
  b.point(b.dx, dx);
  b.point_gradients(dgamma, dbeta);
  b.norm.run(state().stream);
  b.take_gradients(dgamma, dbeta);
}

}  // namespace crossover::cpu
