// Gradients of every layer, activation and loss against central finite differences of a float64
// reference of the same model.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>

#include "backends/backend.h"
#include "core/machine.h"
#include "core/philox.h"
#include "nn/layers.h"
#include "nn/layers/kind.h"
#include "nn/sequential.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::random_tensor;
using Vec = std::vector<double>;

// Keras's definitions, written out again in double (not taken from the library).
double act(ActivationKind a, double x, double alpha = 0) {
  switch (a) {
    case ActivationKind::relu:
      return x > 0 ? x : 0;
    case ActivationKind::sigmoid:
      return 1 / (1 + std::exp(-x));
    case ActivationKind::tanh:
      return std::tanh(x);
    case ActivationKind::elu:
      return x > 0 ? x : alpha * (std::exp(x) - 1);
    case ActivationKind::selu:
      return 1.0507009873554805 * (x > 0 ? x : 1.6732632423543772 * (std::exp(x) - 1));
    case ActivationKind::leaky_relu:
      return x > 0 ? x : alpha * x;
    case ActivationKind::gelu:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case ActivationKind::softplus:
      return std::log(1 + std::exp(x));
    case ActivationKind::swish:
      return x / (1 + std::exp(-x));
    case ActivationKind::exponential:
      return std::exp(x);
    case ActivationKind::sqrt:
      return std::sqrt(x);
    default:
      return x;
  }
}

void apply(ActivationKind a, Vec& row, double alpha = 0) {
  if (a != ActivationKind::softmax) {
    for (double& v : row) v = act(a, v, alpha);
    return;
  }
  double mx = row[0], s = 0;
  for (double v : row) mx = std::max(mx, v);
  for (double& v : row) s += (v = std::exp(v - mx));
  for (double& v : row) v /= s;
}

// Keras's Dense on the last axis of a sample of `shape`: each position of the other axes a row
// (one for flat samples), its activation applied where `activate`.
void dense_reference(Vec& h, Shape& shape, const DenseArgs& d, const Vec& kernel, const Vec* bias,
                     bool activate) {
  const auto f = static_cast<std::size_t>(shape.back());
  const auto units = static_cast<std::size_t>(d.units);
  Vec out;
  for (std::size_t r = 0; r < h.size() / f; ++r) {
    Vec row(units, 0.0);
    for (std::size_t j = 0; j < units; ++j) {
      for (std::size_t i = 0; i < f; ++i) row[j] += h[r * f + i] * kernel[i * units + j];
      if (bias) row[j] += (*bias)[j];
    }
    if (activate) apply(d.activation.kind, row, d.activation.alpha);
    out.insert(out.end(), row.begin(), row.end());
  }
  h = out;
  shape.back() = d.units;
}

// A recurrent layer (SimpleRNN, LSTM, GRU) on one (steps, features) sample, as Keras's cells
// define it: the state from zeros, the kernel (features, gates * units) and the recurrent kernel
// (units, gates * units) with the gates in Keras's order (LSTM i, f, c, o; GRU z, r, h), a
// reset_after GRU's bias (2, 3 units) its input and recurrent biases.
void recurrent_reference(Vec& h, Shape& shape, const Layer& l,
                         const std::map<std::string, std::vector<double>>& w) {
  const Layer& cell = l.inner.at(0);
  const RecurrentCellArgs& a = cell.args<RecurrentCellArgs>();
  const std::string prefix = l.name + "/" + cell.name + "/";
  const Vec& kernel = w.at(prefix + "kernel");
  const Vec& recurrent = w.at(prefix + "recurrent_kernel");
  const Vec* bias = a.use_bias ? &w.at(prefix + "bias") : nullptr;
  const auto steps = static_cast<std::size_t>(shape[0]), f = static_cast<std::size_t>(shape[1]);
  const auto u = static_cast<std::size_t>(a.units);
  const std::size_t gates = cell.type == LayerType::lstm_cell  ? 4
                            : cell.type == LayerType::gru_cell ? 3
                                                               : 1;
  const std::size_t g = gates * u;
  const bool reset_after = cell.type == LayerType::gru_cell && a.reset_after;
  const auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  Vec state(u, 0.0), carry(u, 0.0), out;
  for (std::size_t k = 0; k < steps; ++k) {
    const std::size_t t = l.args<RecurrentArgs>().go_backwards ? steps - 1 - k : k;
    Vec xz(g, 0.0), hz(g, 0.0);  // x . kernel (+ input bias), h . recurrent (+ recurrent bias)
    for (std::size_t j = 0; j < g; ++j) {
      for (std::size_t i = 0; i < f; ++i) xz[j] += h[t * f + i] * kernel[i * g + j];
      for (std::size_t i = 0; i < u; ++i) hz[j] += state[i] * recurrent[i * g + j];
      if (bias) xz[j] += (*bias)[j];
      if (bias && reset_after) hz[j] += (*bias)[g + j];
    }
    Vec next(u);
    for (std::size_t j = 0; j < u; ++j) {
      if (gates == 1) {
        next[j] = act(a.activation.kind, xz[j] + hz[j]);
      } else if (gates == 4) {
        const double i = sig(xz[j] + hz[j]), fg = sig(xz[u + j] + hz[u + j]);
        const double c = std::tanh(xz[2 * u + j] + hz[2 * u + j]);
        const double o = sig(xz[3 * u + j] + hz[3 * u + j]);
        carry[j] = fg * carry[j] + i * c;
        next[j] = o * std::tanh(carry[j]);
      } else {
        const double z = sig(xz[j] + hz[j]), r = sig(xz[u + j] + hz[u + j]);
        double candidate = xz[2 * u + j];
        if (reset_after) {
          candidate += r * hz[2 * u + j];
        } else {  // the reset gate on the state before its product
          for (std::size_t i = 0; i < u; ++i) {
            const double ri = sig(xz[u + i] + hz[u + i]);
            candidate += ri * state[i] * recurrent[i * g + 2 * u + j];
          }
        }
        next[j] = z * state[j] + (1 - z) * std::tanh(candidate);
      }
    }
    state = next;
    if (l.args<RecurrentArgs>().return_sequences) out.insert(out.end(), state.begin(), state.end());
  }
  h = l.args<RecurrentArgs>().return_sequences ? out : state;
  shape = l.args<RecurrentArgs>().return_sequences ? Shape{shape[0], a.units} : Shape{a.units};
}

// Keras's output length and leading padding for one spatial dimension, written out again here
// (not taken from the library): 'valid' floor((in - k) / s) + 1; 'same' ceil(in / s), with
// TensorFlow's padding, the odd one at the end.
struct Span {
  int64_t out, before;
};
Span keras_span(int64_t in, int64_t k, int64_t s, Padding p) {
  if (p == Padding::valid) return {(in - k) / s + 1, 0};
  const int64_t out = (in + s - 1) / s;
  const int64_t total = std::max<int64_t>((out - 1) * s + k - in, 0);
  return {out, total / 2};
}

// h: one sample, channels last, of shape `shape` (height, width, channels); becomes the output.
// A dilated kernel's taps are dilation_rate apart; Keras sizes and pads for the span they cover,
// (kernel - 1) * dilation + 1.
void conv_reference(Vec& h, Shape& shape, const ConvArgs& l, const Vec& kernel, const Vec* bias) {
  const int64_t ih = shape[0], iw = shape[1], ic = shape[2], oc = l.filters;
  const int64_t dh = l.dilation_rate.h, dw = l.dilation_rate.w;
  const Span sh = keras_span(ih, (l.kernel_size.h - 1) * dh + 1, l.strides.h, l.padding);
  const Span sw = keras_span(iw, (l.kernel_size.w - 1) * dw + 1, l.strides.w, l.padding);
  Vec out(static_cast<std::size_t>(sh.out * sw.out * oc), 0.0);
  for (int64_t oy = 0; oy < sh.out; ++oy)
    for (int64_t ox = 0; ox < sw.out; ++ox)
      for (int64_t o = 0; o < oc; ++o) {
        double v = bias ? (*bias)[static_cast<std::size_t>(o)] : 0.0;
        for (int64_t ky = 0; ky < l.kernel_size.h; ++ky)
          for (int64_t kx = 0; kx < l.kernel_size.w; ++kx) {
            const int64_t iy = oy * l.strides.h - sh.before + ky * dh;
            const int64_t ix = ox * l.strides.w - sw.before + kx * dw;
            if (iy < 0 || iy >= ih || ix < 0 || ix >= iw) continue;  // zero padding
            for (int64_t c = 0; c < ic; ++c)
              v +=
                  h[static_cast<std::size_t>((iy * iw + ix) * ic + c)] *
                  kernel[static_cast<std::size_t>(((ky * l.kernel_size.w + kx) * ic + c) * oc + o)];
          }
        out[static_cast<std::size_t>((oy * sw.out + ox) * oc + o)] =
            act(l.activation.kind, v, l.activation.alpha);
      }
  h = out;
  shape = {sh.out, sw.out, oc};
}

// Keras's Conv2DTranspose with output_padding None, from its definition: each input position
// (iy, ix) spreads x * kernel over the output from (iy * stride - before, ix * stride - before),
// the kernel's taps dilation_rate apart, the output 'valid' (in - 1) * stride + max(span, stride)
// long, 'same' in * stride with before = max(span - stride, 0) / 2 (TensorFlow's
// conv2d_transpose), where span = (kernel - 1) * dilation + 1; kernel (kh, kw, filters,
// in_channels).
void conv_transpose_reference(Vec& h, Shape& shape, const ConvArgs& l, const Vec& kernel,
                              const Vec* bias) {
  const int64_t ih = shape[0], iw = shape[1], ic = shape[2], f = l.filters;
  const int64_t dh = l.dilation_rate.h, dw = l.dilation_rate.w;
  const int64_t span_h = (l.kernel_size.h - 1) * dh + 1, span_w = (l.kernel_size.w - 1) * dw + 1;
  const auto length = [&](int64_t in, int64_t k, int64_t s) {
    return l.padding == Padding::same ? in * s : (in - 1) * s + std::max(k, s);
  };
  const auto before = [&](int64_t k, int64_t s) {
    return l.padding == Padding::same ? std::max<int64_t>(k - s, 0) / 2 : 0;
  };
  const int64_t oh = length(ih, span_h, l.strides.h), ow = length(iw, span_w, l.strides.w);
  const int64_t bh = before(span_h, l.strides.h), bw = before(span_w, l.strides.w);
  Vec out(static_cast<std::size_t>(oh * ow * f), 0.0);
  for (int64_t iy = 0; iy < ih; ++iy)
    for (int64_t ix = 0; ix < iw; ++ix)
      for (int64_t ky = 0; ky < l.kernel_size.h; ++ky)
        for (int64_t kx = 0; kx < l.kernel_size.w; ++kx) {
          const int64_t oy = iy * l.strides.h - bh + ky * dh, ox = ix * l.strides.w - bw + kx * dw;
          if (oy < 0 || oy >= oh || ox < 0 || ox >= ow) continue;
          for (int64_t o = 0; o < f; ++o)
            for (int64_t c = 0; c < ic; ++c)
              out[static_cast<std::size_t>((oy * ow + ox) * f + o)] +=
                  h[static_cast<std::size_t>((iy * iw + ix) * ic + c)] *
                  kernel[static_cast<std::size_t>(((ky * l.kernel_size.w + kx) * f + o) * ic + c)];
        }
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] =
        act(l.activation.kind, out[i] + (bias ? (*bias)[i % static_cast<std::size_t>(f)] : 0.0),
            l.activation.alpha);
  h = out;
  shape = {oh, ow, f};
}

// Each value repeated over a size.h x size.w block (UpSampling2D, 'nearest').
void upsample_reference(Vec& h, Shape& shape, Size2 size) {
  const int64_t ih = shape[0], iw = shape[1], c = shape[2], oh = ih * size.h, ow = iw * size.w;
  Vec out(static_cast<std::size_t>(oh * ow * c));
  for (int64_t y = 0; y < oh; ++y)
    for (int64_t x = 0; x < ow; ++x)
      for (int64_t k = 0; k < c; ++k)
        out[static_cast<std::size_t>((y * ow + x) * c + k)] =
            h[static_cast<std::size_t>(((y / size.h) * iw + x / size.w) * c + k)];
  h = out;
  shape = {oh, ow, c};
}

// A sample placed in zeros (ZeroPadding2D, grow) or a window of it taken (Cropping2D): the value
// at (y, x) of the smaller sample is at (y + top, x + left) of the larger.
void margins_reference(Vec& h, Shape& shape, const Margins2& m, bool grow) {
  const int64_t ih = shape[0], iw = shape[1], c = shape[2];
  const int64_t oh = grow ? ih + m.top + m.bottom : ih - m.top - m.bottom;
  const int64_t ow = grow ? iw + m.left + m.right : iw - m.left - m.right;
  Vec out(static_cast<std::size_t>(oh * ow * c), 0.0);
  const int64_t sh = grow ? ih : oh, sw = grow ? iw : ow, lw = grow ? ow : iw;
  for (int64_t y = 0; y < sh; ++y)
    for (int64_t x = 0; x < sw; ++x)
      for (int64_t k = 0; k < c; ++k) {
        const auto small = static_cast<std::size_t>((y * sw + x) * c + k);
        const auto large = static_cast<std::size_t>(((y + m.top) * lw + x + m.left) * c + k);
        if (grow)
          out[large] = h[small];
        else
          out[small] = h[large];
      }
  h = out;
  shape = {oh, ow, c};
}

// Each sample's axes permuted (Permute): output axis i is input axis dims[i] - 1.
void permute_reference(Vec& h, Shape& shape, const std::vector<int64_t>& dims) {
  const std::size_t rank = shape.size();
  std::vector<int64_t> in_stride(rank, 1);
  for (std::size_t a = rank - 1; a-- > 0;) in_stride[a] = in_stride[a + 1] * shape[a + 1];
  Shape out_shape(rank);
  for (std::size_t i = 0; i < rank; ++i)
    out_shape[i] = shape[static_cast<std::size_t>(dims[i] - 1)];
  Vec out(h.size());
  for (std::size_t e = 0; e < out.size(); ++e) {
    int64_t rest = static_cast<int64_t>(e), from = 0;
    for (std::size_t i = rank; i-- > 0;) {
      from += rest % out_shape[i] * in_stride[static_cast<std::size_t>(dims[i] - 1)];
      rest /= out_shape[i];
    }
    out[e] = h[static_cast<std::size_t>(from)];
  }
  h = out;
  shape = out_shape;
}

// Max or average over each window; padded positions never count.
void pool_reference(Vec& h, Shape& shape, Size2 window, Size2 strides, Padding padding, bool max) {
  const int64_t ih = shape[0], iw = shape[1], c = shape[2];
  const Span sh = keras_span(ih, window.h, strides.h, padding);
  const Span sw = keras_span(iw, window.w, strides.w, padding);
  Vec out(static_cast<std::size_t>(sh.out * sw.out * c), 0.0);
  for (int64_t oy = 0; oy < sh.out; ++oy)
    for (int64_t ox = 0; ox < sw.out; ++ox)
      for (int64_t k = 0; k < c; ++k) {
        double best = -1e300, sum = 0;
        int count = 0;
        for (int64_t wy = 0; wy < window.h; ++wy)
          for (int64_t wx = 0; wx < window.w; ++wx) {
            const int64_t iy = oy * strides.h - sh.before + wy;
            const int64_t ix = ox * strides.w - sw.before + wx;
            if (iy < 0 || iy >= ih || ix < 0 || ix >= iw) continue;
            const double v = h[static_cast<std::size_t>((iy * iw + ix) * c + k)];
            best = std::max(best, v);
            sum += v;
            ++count;
          }
        out[static_cast<std::size_t>((oy * sw.out + ox) * c + k)] = max ? best : sum / count;
      }
  h = out;
  shape = {sh.out, sw.out, c};
}

// Batch normalization in training, over the whole batch: each last-axis channel normalised by
// its mean and biased variance over every sample and position, then scaled and shifted.
void batch_norm_reference(std::vector<Vec>& batch, const Layer& l,
                          const std::map<std::string, std::vector<double>>& w) {
  const BatchNormArgs& a = l.args<BatchNormArgs>();
  const std::size_t channels = w.at(l.name + "/moving_mean").size();
  Vec mean(channels, 0.0), var(channels, 0.0);
  double count = 0;
  for (const Vec& h : batch)
    for (std::size_t i = 0; i < h.size(); ++i) mean[i % channels] += h[i];
  for (const Vec& h : batch) count += static_cast<double>(h.size() / channels);
  for (double& m : mean) m /= count;
  for (const Vec& h : batch)
    for (std::size_t i = 0; i < h.size(); ++i)
      var[i % channels] += (h[i] - mean[i % channels]) * (h[i] - mean[i % channels]);
  for (double& v : var) v /= count;
  for (Vec& h : batch)
    for (std::size_t i = 0; i < h.size(); ++i) {
      const std::size_t c = i % channels;
      h[i] = (h[i] - mean[c]) / std::sqrt(var[c] + a.epsilon) *
                 (a.scale ? w.at(l.name + "/gamma")[c] : 1.0) +
             (a.center ? w.at(l.name + "/beta")[c] : 0.0);
    }
}

// Layer normalization of one sample: each run of n values (the last axis) normalised by its own
// mean and biased variance, then scaled and shifted.
void layer_norm_reference(Vec& h, std::size_t n, const Layer& l,
                          const std::map<std::string, std::vector<double>>& w) {
  const LayerNormArgs& a = l.args<LayerNormArgs>();
  for (std::size_t r = 0; r < h.size(); r += n) {
    double mean = 0, var = 0;
    for (std::size_t j = 0; j < n; ++j) mean += h[r + j];
    mean /= static_cast<double>(n);
    for (std::size_t j = 0; j < n; ++j) var += (h[r + j] - mean) * (h[r + j] - mean);
    var /= static_cast<double>(n);
    for (std::size_t j = 0; j < n; ++j)
      h[r + j] = (h[r + j] - mean) / std::sqrt(var + a.epsilon) *
                     (a.scale ? w.at(l.name + "/gamma")[j] : 1.0) +
                 (a.center ? w.at(l.name + "/beta")[j] : 0.0);
  }
}

double binary_reference(BinaryOp op, double a, double b) {
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
      return std::max(a, b);
    case BinaryOp::minimum:
      return std::min(a, b);
    case BinaryOp::average:
      return (a + b) / 2;
  }
  return 0;
}

// Subtract, Multiply, Maximum, Minimum, Average, binary_op, unary_op, by numpy's broadcasting
// written out again: an operand with as many values as the output is read element by element,
// one value is a scalar, one whose last axis is 1 gives each row's value, another (a weight of
// the last axis's size) each column's. False for the other layers.
template <typename From>
bool elementwise_reference(const Layer& l, std::size_t inputs,
                           const std::map<std::string, std::vector<double>>& w, const From& from,
                           const std::vector<Shape>& shapes, const std::vector<int>& reads,
                           std::vector<Vec>& batch, Shape& batch_shape) {
  const LayerType t = l.type;
  if (t != LayerType::subtract && t != LayerType::multiply && t != LayerType::maximum &&
      t != LayerType::minimum && t != LayerType::average && t != LayerType::binary_op &&
      t != LayerType::unary_op)
    return false;
  // unary_op's arguments; a merging layer's op (and no constant or weight).
  UnaryOpArgs u;
  if (const auto* given = l.find_args<UnaryOpArgs>())
    u = *given;
  else
    u.op = l.args<ElementwiseArgs>().op;
  const Vec constant = {u.constant};
  Shape other_shape = {1};
  if (inputs == 2) other_shape = shapes[static_cast<std::size_t>(reads[1])];
  if (inputs == 1 && u.has_weight) other_shape = u.weight_shape;
  const bool other_bigger = shape_size(other_shape) > shape_size(batch_shape);
  const Shape out_shape = other_bigger ? other_shape : batch_shape;
  const auto cols = static_cast<std::size_t>(out_shape.back());
  const auto n = static_cast<std::size_t>(shape_size(out_shape));
  const auto at = [&](const Vec& v, const Shape& shape, std::size_t i) {
    if (v.size() == n) return v[i];
    if (v.size() == 1) return v[0];
    return shape.back() == 1 && v.size() == n / cols ? v[i / cols] : v[i % cols];
  };
  for (std::size_t r = 0; r < batch.size(); ++r) {
    const Vec a = batch[r];
    const Vec& b = inputs == 2 ? from(1)[r]
                   : u.has_weight
                       ? w.at(l.name + "/" + (u.weight_name.empty() ? "kernel" : u.weight_name))
                       : constant;
    Vec out(n);
    for (std::size_t i = 0; i < n; ++i) {
      const double x = at(a, batch_shape, i), y = at(b, other_shape, i);
      out[i] = u.operand_first ? binary_reference(u.op, y, x) : binary_reference(u.op, x, y);
    }
    batch[r] = out;
  }
  batch_shape = out_shape;
  return true;
}

// The seed a training pass of the noise layers draws with (their draws at step 0, as
// training_forward makes them on a fresh model); none: they are the identity (predict).
std::optional<uint64_t> g_noise_seed;

// GaussianNoise, GaussianDropout, SpatialDropout2D in training, with the engine's draws (the
// noise is a pure function of (seed, layer, step, element): core/philox.h), the arithmetic in
// double but each draw's float factor as the engine makes it.
// SpatialDropout2D's factor of element e of sample r: keep / (1 - rate), one draw per sample and
// channel (the last axis). A recurrent layer's dropout draws its input's mask the same way.
double spatial_keep_factor(std::size_t r, std::size_t e, const Shape& shape, float rate,
                           uint32_t index, uint64_t seed) {
  const auto c = static_cast<uint64_t>(shape.back());
  const bool keep = spatial_dropout_keep(seed, index, 0, r * c + e % c, rate);
  return keep ? double{1.0f / (1.0f - rate)} : 0.0;
}

void noise_reference(std::vector<Vec>& batch, const Shape& shape, const Layer& l, uint32_t index,
                     uint64_t seed) {
  for (std::size_t r = 0; r < batch.size(); ++r) {
    Vec& h = batch[r];
    const uint64_t row = r * h.size();
    for (std::size_t e = 0; e < h.size(); ++e) {
      if (l.type == LayerType::gaussian_noise) {
        h[e] += double{l.args<GaussianNoiseArgs>().stddev * philox_normal(seed, index, 0, row + e)};
      } else if (l.type == LayerType::gaussian_dropout) {
        const double rate = l.args<GaussianDropoutArgs>().rate;
        const auto stddev = static_cast<float>(std::sqrt(rate / (1 - rate)));
        h[e] *= double{1.0f + stddev * philox_normal(seed, index, 0, row + e)};
      } else {
        h[e] *= spatial_keep_factor(r, e, shape, l.args<SpatialDropoutArgs>().rate, index, seed);
      }
    }
  }
}

// The float64 reference: the mean loss of the model over the batch, weights by name. Layers run
// over the whole batch in turn (batch normalization needs every sample's values).
double reference_loss(const Sequential& model, const std::map<std::string, std::vector<double>>& w,
                      const Tensor& x, const Tensor& y, const std::string& loss,
                      bool from_logits = false) {
  const int64_t n = x.dim(0), in = x.size() / n;
  double total = 0;
  std::vector<Vec> input;
  for (int64_t r = 0; r < n; ++r) input.emplace_back(x.data() + r * in, x.data() + (r + 1) * in);
  // Each layer's outputs and per-sample shape, for the layers that read them (a graph's).
  std::vector<std::vector<Vec>> outs;
  std::vector<Shape> shapes;
  std::vector<Vec> batch;
  Shape batch_shape;
  // After a final sigmoid or softmax (Dense or Activation), Keras 3 on TensorFlow's
  // cross-entropies take the activation's input as the logits, from_logits or not (its
  // _keras_logits); with from_logits after another activation, its output.
  const Layer& last = model.layers().back();
  const ActivationKind final_kind = layer_kind(last).defers_activation()
                                        ? layer_kind(last).activation(last).kind
                                        : ActivationKind::linear;
  const bool keras_logits =
      loss != "mean_squared_error" && loss != "mse" && loss.rfind("huber", 0) != 0 &&
      (final_kind == ActivationKind::sigmoid || final_kind == ActivationKind::softmax);
  const auto logits_before = [&](const Layer& l, std::size_t li) {
    const ActivationKind a = layer_kind(l).activation(l).kind;
    return (from_logits || keras_logits) && li + 1 == model.layers().size() &&
           (a == ActivationKind::sigmoid || a == ActivationKind::softmax);
  };
  for (std::size_t li = 0; li < model.layers().size(); ++li) {
    const Layer& l = model.layers()[li];
    const std::vector<int>& reads = model.layer_inputs()[li];
    const auto from = [&](std::size_t k) -> const std::vector<Vec>& {
      return reads.empty() ? input : outs[static_cast<std::size_t>(reads[k])];
    };
    batch = from(0);
    batch_shape = reads.empty() ? model.input_shape() : shapes[static_cast<std::size_t>(reads[0])];
    if (reads.empty() && model.input_layers().size() > 1) {
      // A model of several inputs: this input's columns of the packed rows, in the inputs' order.
      int64_t column = 0;
      for (int i : model.input_layers()) {
        if (static_cast<std::size_t>(i) == li) break;
        column += shape_size(model.layers()[static_cast<std::size_t>(i)].input_shape);
      }
      const int64_t width = shape_size(l.input_shape);
      for (std::size_t r = 0; r < batch.size(); ++r)
        batch[r] = Vec(input[r].begin() + column, input[r].begin() + column + width);
      batch_shape = l.input_shape;
    }
    if (l.type == LayerType::add) {
      for (std::size_t k = 1; k < reads.size(); ++k)
        for (std::size_t r = 0; r < batch.size(); ++r)
          for (std::size_t e = 0; e < batch[r].size(); ++e) batch[r][e] += from(k)[r][e];
    } else if (l.type == LayerType::concatenate) {
      // Along the last axis: each position's channels of every input in turn.
      const auto positions = static_cast<std::size_t>(shape_size(batch_shape) / batch_shape.back());
      int64_t channels = 0;
      for (std::size_t k = 0; k < reads.size(); ++k)
        channels += shapes[static_cast<std::size_t>(reads[k])].back();
      for (std::size_t r = 0; r < batch.size(); ++r) {
        Vec joined;
        for (std::size_t p = 0; p < positions; ++p)
          for (std::size_t k = 0; k < reads.size(); ++k) {
            const auto c =
                static_cast<std::size_t>(shapes[static_cast<std::size_t>(reads[k])].back());
            const Vec& v = from(k)[r];
            joined.insert(joined.end(), v.begin() + static_cast<std::ptrdiff_t>(p * c),
                          v.begin() + static_cast<std::ptrdiff_t>((p + 1) * c));
          }
        batch[r] = joined;
      }
      batch_shape.back() = channels;
    } else if (elementwise_reference(l, reads.size(), w, from, shapes, reads, batch, batch_shape)) {
    } else if (l.type == LayerType::reduce) {
      const auto cols = static_cast<std::size_t>(batch_shape.back());
      for (Vec& h : batch) {
        Vec out(h.size() / cols, 0.0);
        for (std::size_t i = 0; i < h.size(); ++i) out[i / cols] += h[i];
        if (l.args<ReduceArgs>().mean)
          for (double& v : out) v /= static_cast<double>(cols);
        h = out;
      }
      batch_shape.back() = 1;
    }
    if (l.type == LayerType::gaussian_noise || l.type == LayerType::gaussian_dropout ||
        l.type == LayerType::spatial_dropout2d) {
      if (g_noise_seed)
        noise_reference(batch, batch_shape, l, static_cast<uint32_t>(li), *g_noise_seed);
      outs.push_back(batch);
      shapes.push_back(batch_shape);
      continue;
    }
    if (g_noise_seed && !l.inner.empty() && l.inner[0].find_args<RecurrentCellArgs>() &&
        l.inner[0].args<RecurrentCellArgs>().dropout > 0) {  // the input's dropout mask
      const auto rate = static_cast<float>(l.inner[0].args<RecurrentCellArgs>().dropout);
      for (std::size_t r = 0; r < batch.size(); ++r)
        for (std::size_t e = 0; e < batch[r].size(); ++e)
          batch[r][e] *= spatial_keep_factor(r, e, batch_shape, rate, static_cast<uint32_t>(li),
                                             *g_noise_seed);
    }
    if (l.type == LayerType::batch_normalization) {
      batch_norm_reference(batch, l, w);
      outs.push_back(batch);
      shapes.push_back(batch_shape);
      continue;
    }
    Shape after;
    for (Vec& h : batch) {
      Shape shape = batch_shape;
      if (l.type == LayerType::conv2d) {
        conv_reference(h, shape, l.args<ConvArgs>(), w.at(l.name + "/kernel"),
                       l.args<ConvArgs>().use_bias ? &w.at(l.name + "/bias") : nullptr);
      } else if (l.type == LayerType::conv1d) {  // one row of an image: (1, steps, channels)
        shape = {1, shape[0], shape[1]};
        conv_reference(h, shape, l.args<ConvArgs>(), w.at(l.name + "/kernel"),
                       l.args<ConvArgs>().use_bias ? &w.at(l.name + "/bias") : nullptr);
        shape = {shape[1], shape[2]};
      } else if (l.type == LayerType::max_pooling1d || l.type == LayerType::average_pooling1d) {
        const PoolingArgs& p = l.args<PoolingArgs>();
        shape = {1, shape[0], shape[1]};
        pool_reference(h, shape, p.pool_size, p.strides, p.padding,
                       l.type == LayerType::max_pooling1d);
        shape = {shape[1], shape[2]};
      } else if (l.type == LayerType::global_average_pooling1d ||
                 l.type == LayerType::global_max_pooling1d) {
        shape = {1, shape[0], shape[1]};
        pool_reference(h, shape, {1, shape[1]}, {1, shape[1]}, Padding::valid,
                       l.type == LayerType::global_max_pooling1d);
        shape = {shape[2]};
      } else if (l.type == LayerType::conv2d_transpose) {
        conv_transpose_reference(h, shape, l.args<ConvArgs>(), w.at(l.name + "/kernel"),
                                 l.args<ConvArgs>().use_bias ? &w.at(l.name + "/bias") : nullptr);
      } else if (l.type == LayerType::max_pooling2d || l.type == LayerType::average_pooling2d) {
        const PoolingArgs& p = l.args<PoolingArgs>();
        pool_reference(h, shape, p.pool_size, p.strides, p.padding,
                       l.type == LayerType::max_pooling2d);
      } else if (l.type == LayerType::up_sampling2d) {
        upsample_reference(h, shape, l.args<UpSamplingArgs>().size);
      } else if (l.type == LayerType::zero_padding2d) {
        margins_reference(h, shape, l.args<ZeroPaddingArgs>().padding, true);
      } else if (l.type == LayerType::cropping2d) {
        margins_reference(h, shape, l.args<CroppingArgs>().cropping, false);
      } else if (l.type == LayerType::zero_padding1d || l.type == LayerType::cropping1d) {
        // (steps, features) as (steps, 1, features): the 2D reference with no columns.
        const bool grow = l.type == LayerType::zero_padding1d;
        shape = {shape[0], 1, shape[1]};
        margins_reference(
            h, shape,
            grow ? l.args<ZeroPadding1DArgs>().padding : l.args<Cropping1DArgs>().cropping, grow);
        shape = {shape[0], shape[2]};
      } else if (l.type == LayerType::permute) {
        permute_reference(h, shape, l.args<PermuteArgs>().dims);
      } else if (l.type == LayerType::repeat_vector) {
        const int64_t n = l.args<RepeatVectorArgs>().n;
        Vec out;
        for (int64_t k = 0; k < n; ++k) out.insert(out.end(), h.begin(), h.end());
        h = out;
        shape = {n, shape[0]};
      } else if (l.type == LayerType::global_average_pooling2d ||
                 l.type == LayerType::global_max_pooling2d) {
        pool_reference(h, shape, {shape[0], shape[1]}, {shape[0], shape[1]}, Padding::valid,
                       l.type == LayerType::global_max_pooling2d);
        shape = {shape[2]};
      } else if (l.type == LayerType::flatten) {
        shape = {shape_size(shape)};
      } else if (l.type == LayerType::reshape) {
        shape = l.args<ReshapeArgs>().target_shape;  // no -1 in these tests
      } else if (l.type == LayerType::simple_rnn || l.type == LayerType::lstm ||
                 l.type == LayerType::gru || l.type == LayerType::rnn) {
        recurrent_reference(h, shape, l, w);
      } else if (l.type == LayerType::time_distributed) {  // a Dense on each time step
        const Layer& inner = l.inner.at(0);
        const std::string prefix = l.name + "/" + inner.name + "/";
        const DenseArgs& d = inner.args<DenseArgs>();
        dense_reference(h, shape, d, w.at(prefix + "kernel"),
                        d.use_bias ? &w.at(prefix + "bias") : nullptr, true);
      } else if (l.type == LayerType::dense) {
        const DenseArgs& d = l.args<DenseArgs>();
        dense_reference(h, shape, d,
                        w.at(l.name + "/" + (d.weight_name.empty() ? "kernel" : d.weight_name)),
                        d.use_bias ? &w.at(l.name + "/bias") : nullptr, !logits_before(l, li));
      } else if (l.type == LayerType::activation || l.type == LayerType::leaky_relu ||
                 l.type == LayerType::elu) {
        const LayerActivation& a = l.args<ActivationArgs>().activation;
        if (!logits_before(l, li)) {  // over the last axis, as Keras's softmax
          const auto cols = static_cast<std::ptrdiff_t>(shape.back());
          for (auto row = h.begin(); row != h.end(); row += cols) {
            Vec part(row, row + cols);
            apply(a.kind, part, a.alpha);
            std::copy(part.begin(), part.end(), row);
          }
        }
      } else if (l.type == LayerType::rescaling) {
        const RescalingArgs& a = l.args<RescalingArgs>();
        for (double& v : h) v = v * a.scale + a.offset;
      } else if (l.type == LayerType::layer_normalization) {
        // The last axis: gamma's length, else the sample's when it is a vector (these tests).
        const LayerNormArgs& a = l.args<LayerNormArgs>();
        const std::size_t n = a.scale    ? w.at(l.name + "/gamma").size()
                              : a.center ? w.at(l.name + "/beta").size()
                                         : h.size();
        layer_norm_reference(h, n, l, w);
      }
      after = shape;
    }
    batch_shape = after;
    outs.push_back(batch);
    shapes.push_back(batch_shape);
  }
  for (int64_t r = 0; r < n; ++r) {
    Vec& h = batch[static_cast<std::size_t>(r)];
    const int64_t c = static_cast<int64_t>(h.size());
    // from_logits (or a final sigmoid's or softmax's logits): the loss's own softmax (sigmoid for
    // binary) of the logits.
    if (from_logits || keras_logits)
      apply(loss == "binary_crossentropy" ? ActivationKind::sigmoid : ActivationKind::softmax, h);
    // Keras's cross-entropies of probabilities renormalise them (a sigmoid's do not sum to 1).
    double sum = 0;
    for (double v : h) sum += v;
    if (loss == "sparse_categorical_crossentropy") {
      total -= std::log(h[static_cast<std::size_t>(y[r])] / sum);
    } else if (loss == "categorical_crossentropy") {
      for (int64_t j = 0; j < c; ++j)
        total -= y[r * c + j] * std::log(h[static_cast<std::size_t>(j)] / sum);
    } else if (loss == "binary_crossentropy") {
      double l = 0;
      for (int64_t j = 0; j < c; ++j) {
        const double p = h[static_cast<std::size_t>(j)], t = y[r * c + j];
        l -= t * std::log(p) + (1 - t) * std::log(1 - p);
      }
      total += l / static_cast<double>(c);
    } else if (loss.rfind("huber", 0) == 0) {
      // Keras 3's huber: 0.5 e^2 within delta, delta |e| - 0.5 delta^2 beyond ("huber:0.3").
      const double delta = loss.size() > 6 ? std::stod(loss.substr(6)) : 1.0;
      double l = 0;
      for (int64_t j = 0; j < c; ++j) {
        const double e = h[static_cast<std::size_t>(j)] - y[r * c + j], a = std::fabs(e);
        l += a <= delta ? 0.5 * e * e : delta * a - 0.5 * delta * delta;
      }
      total += l / static_cast<double>(c);
    } else {
      double l = 0;
      for (int64_t j = 0; j < c; ++j) {
        const double e = h[static_cast<std::size_t>(j)] - y[r * c + j];
        l += e * e;
      }
      total += l / static_cast<double>(c);
    }
  }
  return total / static_cast<double>(n);
}

struct Case {
  std::string name;
  std::vector<Layer> layers;
  std::string loss;
  Shape sample = {5};  // one sample's shape
  bool from_logits = false;
  std::optional<LayerGraph> graph = std::nullopt;  // a functional model instead of `layers`
};

// The case's loss as compile takes it: "huber:0.3" is Huber with delta 0.3.
LossSpec spec_of(const Case& c) {
  const auto colon = c.loss.find(':');
  if (colon == std::string::npos) return {c.loss, c.from_logits};
  return {c.loss.substr(0, colon), c.from_logits, std::stod(c.loss.substr(colon + 1))};
}

void check_gradients(const Case& c) {
  SCOPED_TRACE(c.name);
  Sequential model = c.graph ? Sequential(*c.graph) : Sequential(c.layers);
  model.compile(SGD(), spec_of(c), {}, {.threads = 1, .seed = 7});
  const int64_t n = 6;
  Shape x_shape = {n};
  x_shape.insert(x_shape.end(), c.sample.begin(), c.sample.end());
  const Tensor x = random_tensor(x_shape, 1);
  // Build so the output width is known.
  const Tensor probe = model.predict(x);
  const int64_t out = probe.dim(1);
  Tensor y;
  if (c.loss == "sparse_categorical_crossentropy") {
    y = Tensor({n});
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(i % out);
  } else if (c.loss == "categorical_crossentropy") {
    y = Tensor({n, out});
    for (int64_t i = 0; i < n; ++i) y[i * out + (i * 7) % out] = 1.0f;
  } else if (c.loss == "binary_crossentropy") {
    y = Tensor({n, out});
    for (int64_t i = 0; i < n * out; ++i) y[i] = static_cast<float>((i * 5) % 3 == 0);
  } else {
    y = random_tensor({n, out}, 2);
  }
  // With noise drawn (a training pass of the noise layers): the gradients of that pass
  // (training_forward, training_backward), its draws reproduced by the reference.
  bool noisy = false;
  for (const Layer& l : model.layers()) noisy = noisy || layer_kind(l).random_in_training(l);
  const auto grads =
      noisy ? (model.training_forward(x), model.training_backward(y, spec_of(c)).gradients)
            : model.gradients(x, y);
  if (noisy) g_noise_seed = 7;  // compile's seed
  struct Reset {
    ~Reset() { g_noise_seed.reset(); }
  } reset;
  std::map<std::string, std::vector<double>> w;
  for (const NamedTensor& t : model.get_weights())
    w[t.name] = std::vector<double>(t.value.values().begin(), t.value.values().end());
  ASSERT_EQ(grads.size(), w.size());
  for (const NamedTensor& g : grads) {
    auto& values = w.at(g.name);
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double h = 1e-6, keep = values[i];
      values[i] = keep + h;
      const double up = reference_loss(model, w, x, y, c.loss, c.from_logits);
      values[i] = keep - h;
      const double down = reference_loss(model, w, x, y, c.loss, c.from_logits);
      values[i] = keep;
      const double fd = (up - down) / (2 * h);
      EXPECT_NEAR(g.value[static_cast<int64_t>(i)], fd, 2e-4 + 2e-3 * std::abs(fd))
          << g.name << "[" << i << "]";
    }
  }
}

// The backend's dense_forward itself, with every activation (the model fuses only linear and
// relu into it, but the backend contract takes any): the CPU once applied relu where asked for a
// sigmoid without bias, found by the GPU tests' comparison on an H200. The last three shapes
// have more rows of weights than the threads have rows of partial sums, so the forward splits the
// reduction across the threads (forward_by_weight_rows) where a thread's share of the layer fits
// the CPU's L2 (the first two on any L2 of 256 KiB or more, SMALL's 784x128 at 2 threads from 784
// KiB): 2 and 3 blocks, k not a multiple of 16.
TEST(CpuBackend, DenseForwardAppliesEveryActivationAsTheFloat64Reference) {
  struct Shape3 {
    int64_t m, k, n;
  };
  uint64_t seed = 40;
  for (int threads : {2, 3})
    for (const Shape3 s : {Shape3{1, 1, 1}, Shape3{7, 97, 13}, Shape3{33, 128, 10},
                           Shape3{16, 1024, 16}, Shape3{10, 1000, 30}, Shape3{32, 784, 128}})
      for (ActivationKind a :
           {ActivationKind::linear, ActivationKind::relu, ActivationKind::sigmoid,
            ActivationKind::tanh, ActivationKind::softmax})
        for (bool bias : {true, false}) {
          SCOPED_TRACE(std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n) +
                       " " + std::string(activation_name(a)) + (bias ? " bias" : " no bias") +
                       ", " + std::to_string(threads) + " threads");
          std::unique_ptr<Backend> be = make_cpu_backend(threads);
          const Tensor x = random_tensor({s.m, s.k}, ++seed), w = random_tensor({s.k, s.n}, ++seed),
                       b = random_tensor({s.n}, ++seed);
          std::vector<float> y(static_cast<std::size_t>(s.m * s.n), std::nanf(""));
          be->dense_forward(x.data(), w.data(), bias ? b.data() : nullptr, y.data(), s.m, s.k, s.n,
                            a);
          for (int64_t r = 0; r < s.m; ++r) {
            // float32 sums of k terms round to about sqrt(k) ulps of the terms' magnitudes.
            Vec row(static_cast<std::size_t>(s.n)), magnitude(static_cast<std::size_t>(s.n));
            for (int64_t j = 0; j < s.n; ++j) {
              double v = bias ? b[j] : 0.0, size = std::abs(v);
              for (int64_t i = 0; i < s.k; ++i) {
                v += double(x[r * s.k + i]) * w[i * s.n + j];
                size += std::abs(double(x[r * s.k + i]) * w[i * s.n + j]);
              }
              row[static_cast<std::size_t>(j)] = v;
              magnitude[static_cast<std::size_t>(j)] = size;
            }
            apply(a, row);
            for (int64_t j = 0; j < s.n; ++j) {
              const auto jj = static_cast<std::size_t>(j);
              ASSERT_NEAR(y[static_cast<std::size_t>(r * s.n + j)], row[jj],
                          1e-5 + 1e-5 * std::abs(row[jj]) + 1e-6 * magnitude[jj])
                  << "row " << r << " column " << j;
            }
          }
        }
}

// When the forward splits: SMALL's first layer at batch 32 and 2 threads on the Zen 4's 1 MiB L2
// (803 KB a thread), not on a 512 KiB L2, not BIG's 784x1000 layer (6.3 MB a thread), not at
// batch 512 (more partial-sum rows than weight rows), never on one thread or an unknown L2.
TEST(CpuBackend, TheForwardSplitsTheWeightsRowsWhereTheyFitAThreadsL2) {
  const int64_t mib = 1 << 20;
  EXPECT_TRUE(cpu_forward_splits_weight_rows(32, 784, 128, 2, mib));
  EXPECT_FALSE(cpu_forward_splits_weight_rows(32, 784, 128, 2, mib / 2));
  EXPECT_TRUE(cpu_forward_splits_weight_rows(32, 784, 128, 4, mib / 2));
  EXPECT_FALSE(cpu_forward_splits_weight_rows(32, 784, 1000, 2, mib));
  EXPECT_TRUE(cpu_forward_splits_weight_rows(32, 1000, 10, 2, mib));
  EXPECT_FALSE(cpu_forward_splits_weight_rows(512, 784, 128, 2, mib));
  EXPECT_FALSE(cpu_forward_splits_weight_rows(32, 784, 128, 1, mib));
  EXPECT_FALSE(cpu_forward_splits_weight_rows(32, 784, 128, 2, 0));
}

// ... and the backend takes that path: a layer whose share fits this CPU's L2 gets other bits at
// 2 threads than at 1 (partial sums), the same bits run after run at each count.
TEST(CpuBackend, DenseForwardSplitsTheWeightsRowsWhereTheyFitTheL2) {
  const int64_t m = 16, k = 2048, n = 16;  // 1 MFLOP: above the one-thread threshold
  if (!cpu_forward_splits_weight_rows(m, k, n, 2, cpu_info().l2_bytes))
    GTEST_SKIP() << "this CPU's L2 (" << cpu_info().l2_bytes << " bytes; 0: sysfs does not say) "
                 << "is too small for a 2048x16 layer's share";
  const Tensor x = random_tensor({m, k}, 7), w = random_tensor({k, n}, 8);
  auto forward = [&](int threads) {
    std::unique_ptr<Backend> be = make_cpu_backend(threads);
    std::vector<float> y(static_cast<std::size_t>(m * n));
    be->dense_forward(x.data(), w.data(), nullptr, y.data(), m, k, n, ActivationKind::linear);
    return y;
  };
  const std::vector<float> one = forward(1), two = forward(2);
  EXPECT_NE(one, two) << "the 2-thread forward did not split the reduction";
  EXPECT_EQ(two, forward(2));
  EXPECT_EQ(one, forward(1));
}

TEST(Gradients, DenseWithEachActivationMatchFiniteDifferences) {
  for (const char* a : {"linear", "relu", "sigmoid", "tanh", "softmax", "elu", "selu", "leaky_relu",
                        "gelu", "softplus", "swish", "exponential"})
    check_gradients({std::string("hidden ") + a,
                     {Input({5}), Dense(7, a), Dense(3, "softmax")},
                     "sparse_categorical_crossentropy"});
}

TEST(Gradients, ActivationLayersMatchFiniteDifferences) {
  for (const char* a : {"relu", "sigmoid", "tanh", "softmax", "elu", "selu", "leaky_relu", "gelu",
                        "softplus", "swish", "exponential"})
    check_gradients({std::string("activation ") + a,
                     {Input({5}), Dense(7), Activation(a), Dense(4), Activation("softmax")},
                     "categorical_crossentropy"});
  check_gradients({"LeakyReLU(0.1) and ELU(0.5)",
                   {Input({5}), Dense(7), LeakyReLU(0.1), Dense(6), ELU(0.5), Dense(3)},
                   "mean_squared_error"});
}

// Rescaling first (no input gradient) and between layers (x * scale passed down).
TEST(Gradients, RescalingMatchesFiniteDifferences) {
  check_gradients(
      {"Rescaling first and inside",
       {Input({5}), Rescaling(0.5, -0.25), Dense(7, "tanh"), Rescaling(-3.0, 1.0), Dense(3)},
       "mean_squared_error"});
}

// The activations the loss op does not apply, as the final layer's: applied by the layer itself
// in training too (Dense's and Activation's), through the mean squared error.
TEST(Gradients, FinalLayerActivationsTheLossOpDoesNotApplyMatchFiniteDifferences) {
  for (const char* a : {"elu", "gelu", "swish", "softplus"}) {
    check_gradients({std::string("final Dense ") + a,
                     {Input({5}), Dense(7, "tanh"), Dense(3, a)},
                     "mean_squared_error"});
    check_gradients({std::string("final Activation ") + a,
                     {Input({5}), Dense(3), Activation(a)},
                     "mean_squared_error"});
  }
  Layer leaky = Dense(3, "leaky_relu");
  leaky.args<DenseArgs>().activation.alpha = 0.3f;
  check_gradients(
      {"final Dense leaky_relu 0.3", {Input({5}), Dense(7), leaky}, "mean_squared_error"});
}

TEST(Gradients, Conv2DWithGeluAndEluMatchFiniteDifferences) {
  for (const char* a : {"gelu", "elu"})
    check_gradients({std::string("conv ") + a,
                     {Input({5, 5, 2}), Conv2D(3, 3, a), Flatten(), Dense(4, "softmax")},
                     "sparse_categorical_crossentropy",
                     {5, 5, 2}});
}

// TimeDistributed(Dense) first (no input gradient) and inside (its input gradient passed down),
// each with the Dense's activation applied per time step.
TEST(Gradients, TimeDistributedDenseMatchesFiniteDifferences) {
  check_gradients({"TimeDistributed first and inside",
                   {Input({4, 3}), TimeDistributed(Dense(5, "tanh")),
                    TimeDistributed(Dense(2, "sigmoid", false)), Flatten(), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {4, 3}});
}

// Dense on (steps, features) samples, as Keras's: on the last axis, first (no input gradient) and
// inside, with a softmax per position.
TEST(Gradients, DenseOnTheLastAxisOfSequenceSamplesMatchesFiniteDifferences) {
  check_gradients(
      {"Dense on (steps, features)",
       {Input({3, 4}), Dense(5, "tanh"), Dense(4, "softmax"), Flatten(), Dense(3, "softmax")},
       "sparse_categorical_crossentropy",
       {3, 4}});
}

// Conv1D first (no input gradient), strided with 'same' padding, and dilated, as Keras's.
TEST(Gradients, Conv1DMatchesFiniteDifferences) {
  check_gradients({"Conv1D first, strided, dilated",
                   {Input({9, 3}), Conv1D(4, 3, "tanh"), Conv1D(3, 2, "linear", 2, "same"),
                    Conv1D(2, 2, "elu", 1, "same", false, 2), Flatten(), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {9, 3}});
}

// The 1-D poolings over (steps, channels): windows of steps, 'same' padding, the global forms.
TEST(Gradients, Pooling1DMatchesFiniteDifferences) {
  check_gradients({"max and average 1-D pooling",
                   {Input({9, 2}), Conv1D(3, 2, "tanh"), MaxPooling1D(2),
                    AveragePooling1D(3, 1, "same"), Flatten(), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {9, 2}});
  for (const bool max : {false, true})
    check_gradients({max ? "global max 1-D pooling" : "global average 1-D pooling",
                     {Input({5, 3}), Conv1D(4, 2, "tanh"),
                      max ? GlobalMaxPooling1D() : GlobalAveragePooling1D(), Dense(3, "softmax")},
                     "sparse_categorical_crossentropy",
                     {5, 3}});
}

// The recurrent layers on oneDNN's RNN primitives: first (no input gradient) and stacked, each
// cell, return_sequences and go_backwards, a GRU of either reset placement, no bias.
TEST(Gradients, RecurrentLayersMatchFiniteDifferences) {
  auto with = [](Layer l, bool sequences, bool backwards) {
    l.args<RecurrentArgs>().return_sequences = sequences;
    l.args<RecurrentArgs>().go_backwards = backwards;
    return l;
  };
  auto cell = [](Layer l, auto&& change) {
    change(l.inner.at(0).args<RecurrentCellArgs>());
    return l;
  };
  for (const bool backwards : {false, true}) {
    const std::string dir = backwards ? ", go_backwards" : "";
    check_gradients({"LSTM first, then stacked" + dir,
                     {Input({4, 3}), with(LSTM(5), true, backwards),
                      with(LSTM(3), false, backwards), Dense(3, "softmax")},
                     "sparse_categorical_crossentropy",
                     {4, 3}});
    check_gradients({"GRU reset_after, sequences into a Dense per step" + dir,
                     {Input({4, 3}), Dense(3, "tanh"), with(GRU(4), true, backwards), Flatten(),
                      Dense(3, "softmax")},
                     "sparse_categorical_crossentropy",
                     {4, 3}});
    check_gradients({"SimpleRNN tanh and relu" + dir,
                     {Input({5, 2}), with(SimpleRNN(4), true, backwards),
                      with(SimpleRNN(3, "relu"), false, backwards), Dense(3, "softmax")},
                     "sparse_categorical_crossentropy",
                     {5, 2}});
  }
  check_gradients(
      {"GRU reset before the product, no bias",
       {Input({4, 3}), Dense(2, "tanh"),
        cell(GRU(4), [](RecurrentCellArgs& a) { a.reset_after = false, a.use_bias = false; }),
        Dense(3, "softmax")},
       "sparse_categorical_crossentropy",
       {4, 3}});
  // Keras's dropout on the input: one mask per sample and feature, the same at every step.
  check_gradients(
      {"LSTM and GRU with dropout",
       {Input({4, 3}),
        with(cell(LSTM(5), [](RecurrentCellArgs& a) { a.dropout = 0.4; }), true, false),
        cell(GRU(3), [](RecurrentCellArgs& a) { a.dropout = 0.3; }), Dense(3, "softmax")},
       "sparse_categorical_crossentropy",
       {4, 3}});
  check_gradients(
      {"LSTM without bias, SimpleRNN sigmoid",
       {Input({3, 3}), Dense(2, "tanh"),
        with(cell(LSTM(4), [](RecurrentCellArgs& a) { a.use_bias = false; }), true, false),
        SimpleRNN(3, "sigmoid"), Dense(3, "softmax")},
       "sparse_categorical_crossentropy",
       {3, 3}});
}

// A softmax on samples of several axes normalizes each position's last axis, as Keras's.
TEST(Gradients, SoftmaxOverTheLastAxisOfSequenceSamplesMatchesFiniteDifferences) {
  check_gradients({"Activation softmax on (steps, features)",
                   {Input({3, 4}), TimeDistributed(Dense(4)), Activation("softmax"), Flatten(),
                    Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {3, 4}});
}

TEST(Gradients, DenseWithoutBiasAndZeroRateDropoutMatchFiniteDifferences) {
  check_gradients({"no bias, dropout 0",
                   {Flatten({5}), Dense(6, "relu", false), Dropout(0.0), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy"});
}

TEST(Gradients, EachLossMatchesFiniteDifferences) {
  check_gradients({"sparse CE",
                   {Input({5}), Dense(4, "tanh"), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy"});
  check_gradients({"categorical CE",
                   {Input({5}), Dense(4, "tanh"), Dense(3, "softmax")},
                   "categorical_crossentropy"});
  check_gradients(
      {"binary CE", {Input({5}), Dense(4, "tanh"), Dense(2, "sigmoid")}, "binary_crossentropy"});
  check_gradients({"MSE", {Input({5}), Dense(4, "relu"), Dense(3)}, "mean_squared_error"});
  check_gradients({"MSE after tanh", {Input({5}), Dense(4), Dense(3, "tanh")}, "mse"});
  check_gradients({"MSE after softmax", {Input({5}), Dense(4), Dense(3, "softmax")}, "mse"});
  // Huber (Keras 3's default delta 1, and 0.3: the random targets put errors on both sides).
  check_gradients({"Huber", {Input({5}), Dense(4, "relu"), Dense(3)}, "huber"});
  check_gradients(
      {"Huber delta 0.3 after tanh", {Input({5}), Dense(4), Dense(3, "tanh")}, "huber:0.3"});
  // After a final sigmoid (softmax under binary CE), Keras 3 on TensorFlow reads its input as
  // the logits (_keras_logits): a softmax (sigmoid) cross-entropy of them.
  check_gradients({"sparse CE after sigmoid",
                   {Input({5}), Dense(4, "tanh"), Dense(3, "sigmoid")},
                   "sparse_categorical_crossentropy"});
  check_gradients({"categorical CE after sigmoid",
                   {Input({5}), Dense(4, "tanh"), Dense(3, "sigmoid")},
                   "categorical_crossentropy"});
  check_gradients({"sparse CE after an Activation sigmoid",
                   {Input({5}), Dense(3), Activation("sigmoid")},
                   "sparse_categorical_crossentropy"});
  check_gradients({"binary CE after softmax",
                   {Input({5}), Dense(4, "tanh"), Dense(3, "softmax")},
                   "binary_crossentropy"});
  // Probabilities no sigmoid or softmax made: Keras renormalises them before the log.
  check_gradients({"sparse CE after softplus",
                   {Input({5}), Dense(4, "tanh"), Dense(3, "softplus")},
                   "sparse_categorical_crossentropy"});
  check_gradients({"categorical CE after softplus",
                   {Input({5}), Dense(4, "tanh"), Dense(3, "softplus")},
                   "categorical_crossentropy"});
}

TEST(Gradients, EachCrossEntropyFromLogitsMatchesFiniteDifferences) {
  for (const char* loss :
       {"sparse_categorical_crossentropy", "categorical_crossentropy", "binary_crossentropy"})
    check_gradients({std::string("from logits ") + loss,
                     {Input({5}), Dense(4, "tanh"), Dense(3)},
                     loss,
                     {5},
                     true});
}

// from_logits after a final activation, as Keras 3 (TensorFlow) trains it: after a sigmoid or
// softmax (Dense's or an Activation layer's) the loss's own softmax or sigmoid of the activation's
// input (Keras takes it back as the logits); after relu or tanh, of the activation's output (the
// layer applies it in the forward and backward passes).
TEST(Gradients, FromLogitsAfterAFinalActivationMatchesFiniteDifferences) {
  struct Final {
    const char* name;
    std::vector<Layer> layers;
    const char* loss;
  };
  const std::vector<Final> finals = {
      {"dense sigmoid, sparse",
       {Input({5}), Dense(4, "tanh"), Dense(3, "sigmoid")},
       "sparse_categorical_crossentropy"},
      {"dense softmax, categorical",
       {Input({5}), Dense(4, "tanh"), Dense(3, "softmax")},
       "categorical_crossentropy"},
      {"dense softmax, binary", {Input({5}), Dense(3, "softmax")}, "binary_crossentropy"},
      {"activation sigmoid, sparse",
       {Input({5}), Dense(3), Activation("sigmoid")},
       "sparse_categorical_crossentropy"},
      {"activation softmax, categorical",
       {Input({5}), Dense(3), Activation("softmax")},
       "categorical_crossentropy"},
      {"dense tanh, sparse",
       {Input({5}), Dense(4, "relu"), Dense(3, "tanh")},
       "sparse_categorical_crossentropy"},
      {"dense relu, binary", {Input({5}), Dense(3, "relu")}, "binary_crossentropy"},
      {"activation tanh, categorical",
       {Input({5}), Dense(3), Activation("tanh")},
       "categorical_crossentropy"},
  };
  for (const Final& f : finals)
    check_gradients({std::string("from logits, ") + f.name, f.layers, f.loss, {5}, true});
}

// A linear output with from_logits is the softmax (sigmoid) output without from_logits, trained by
// the same arithmetic: the same weights bit for bit, the same losses and accuracies; only
// predict differs, giving the logits.
TEST(FromLogits, TrainsAsTheActivatedOutputAndPredictsTheLogits) {
  for (const char* loss :
       {"sparse_categorical_crossentropy", "categorical_crossentropy", "binary_crossentropy"}) {
    SCOPED_TRACE(loss);
    const bool binary = std::string(loss) == "binary_crossentropy";
    Sequential probs({Input({5}), Dense(6, "relu"), Dense(3, binary ? "sigmoid" : "softmax")});
    Sequential logits({Input({5}), Dense(6, "relu"), Dense(3)});
    probs.compile(Adam(), loss, {"accuracy"}, {.threads = 1, .seed = 3});
    logits.compile(Adam(), LossSpec{loss, true}, {"accuracy"}, {.threads = 1, .seed = 3});
    EXPECT_TRUE(logits.from_logits());
    const int64_t n = 20;
    const Tensor x = random_tensor({n, 5}, 11);
    Tensor y =
        std::string(loss) == "sparse_categorical_crossentropy" ? Tensor({n}) : Tensor({n, 3});
    for (int64_t i = 0; i < n; ++i) {
      if (y.rank() == 1)
        y[i] = static_cast<float>(i % 3);
      else
        for (int64_t j = 0; j < 3; ++j)
          y[i * 3 + j] = binary ? static_cast<float>((i + j) % 2) : (i % 3 == j ? 1.0f : 0.0f);
    }
    probs.predict(x);
    logits.predict(x);
    logits.set_weights(probs.get_weights());
    const FitOptions fo{.epochs = 2, .batch_size = 8, .shuffle = false, .verbose = 0};
    const History hp = probs.fit(x, y, fo), hl = logits.fit(x, y, fo);
    ASSERT_EQ(hp.epochs.size(), hl.epochs.size());
    for (std::size_t e = 0; e < hp.epochs.size(); ++e) {
      EXPECT_EQ(hp.epochs[e].loss, hl.epochs[e].loss);
      EXPECT_EQ(hp.epochs[e].accuracy, hl.epochs[e].accuracy);
    }
    const auto wp = probs.get_weights(), wl = logits.get_weights();
    for (std::size_t i = 0; i < wp.size(); ++i)
      for (int64_t k = 0; k < wp[i].value.size(); ++k)
        ASSERT_EQ(wp[i].value[k], wl[i].value[k]) << wp[i].name << "[" << k << "]";
    const EvaluateResult ep = probs.evaluate(x, y, {.verbose = 0}),
                         el = logits.evaluate(x, y, {.verbose = 0});
    EXPECT_EQ(ep.loss, el.loss);
    EXPECT_EQ(ep.accuracy, el.accuracy);
    const Tensor p = probs.predict(x), z = logits.predict(x);
    for (int64_t r = 0; r < n; ++r) {
      Vec row(z.data() + r * 3, z.data() + r * 3 + 3);
      apply(binary ? ActivationKind::sigmoid : ActivationKind::softmax, row);
      for (int64_t j = 0; j < 3; ++j) EXPECT_NEAR(p[r * 3 + j], row[std::size_t(j)], 1e-6);
    }
  }
}

TEST(FromLogits, IsRefusedForMeanSquaredError) {
  Sequential linear({Input({5}), Dense(3)});
  const std::string mse_error = testing_util::error_of([&] {
    linear.compile(Adam(), LossSpec{"mse", true});
  });
  EXPECT_NE(mse_error.find("cross-entropies"), std::string::npos) << mse_error;
  linear.compile(Adam(), "sparse_categorical_crossentropy");  // the string overload
  EXPECT_FALSE(linear.from_logits());
}

// ---- convolution and pooling ----

TEST(Gradients, Conv2DValidStrideOneWithBiasAndReluMatchFiniteDifferences) {
  check_gradients({"conv valid s1 relu",
                   {Input({6, 6, 2}), Conv2D(3, 3, "relu"), Flatten(), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {6, 6, 2}});
}

TEST(Gradients, Conv2DSameStrideTwoWithoutBiasMatchFiniteDifferences) {
  // 6 rows, kernel 3, stride 2: 3 outputs and one row of padding, at the bottom (TensorFlow's).
  check_gradients(
      {"conv same s2 no bias",
       {Input({6, 6, 2}), Conv2D(3, 3, "linear", 2, "same", false), Flatten(), Dense(3, "softmax")},
       "sparse_categorical_crossentropy",
       {6, 6, 2}});
}

TEST(Gradients, Conv2DSameWithAnEvenKernelAndTanhMatchFiniteDifferences) {
  // A 2x4 kernel: one row and three columns of padding, the odd ones at the bottom and right.
  check_gradients(
      {"conv same 2x4 tanh",
       {Input({5, 6, 2}), Conv2D(2, {2, 4}, "tanh", 1, "same"), Flatten(), Dense(3, "softmax")},
       "categorical_crossentropy",
       {5, 6, 2}});
}

TEST(Gradients, Conv2DValidStrideTwoMatchFiniteDifferences) {
  check_gradients({"conv valid s2 relu",
                   {Input({7, 7, 1}), Conv2D(4, 3, "relu", 2), Flatten(), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {7, 7, 1}});
}

TEST(Gradients, Conv2DAfterConv2DPassesItsInputGradientMatchFiniteDifferences) {
  // The second convolution's input gradient (the first layer's is never computed), valid and
  // same with stride 2.
  check_gradients({"conv -> conv valid",
                   {Input({6, 6, 2}), Conv2D(3, 2, "tanh"), Conv2D(4, 3, "relu"), Flatten(),
                    Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {6, 6, 2}});
  check_gradients({"conv -> conv same s2",
                   {Input({7, 7, 2}), Conv2D(3, 2, "tanh"), Conv2D(4, 3, "linear", 2, "same"),
                    Flatten(), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {7, 7, 2}});
}

TEST(Gradients, DilatedConv2DMatchesFiniteDifferences) {
  // dilation_rate 2: a 3x3 kernel spans 5x5, so 'valid' leaves 3x3 of the 7x7 input.
  check_gradients({"conv valid dilation 2 relu",
                   {Input({7, 7, 2}), Conv2D(3, 3, "relu", 1, "valid", true, 2), Flatten(),
                    Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {7, 7, 2}});
  // (2, 3): a 2x3 kernel spans 3x7; after a first convolution, so its input gradient is taken.
  check_gradients(
      {"conv -> conv valid dilation (2, 3)",
       {Input({7, 9, 2}), Conv2D(3, 2, "tanh"), Conv2D(2, {2, 3}, "tanh", 1, "valid", true, {2, 3}),
        Flatten(), Dense(3, "softmax")},
       "sparse_categorical_crossentropy",
       {7, 9, 2}});
}

TEST(Gradients, DilatedConv2DWithSamePaddingMatchesFiniteDifferences) {
  // 'same' pads for the dilated span as TensorFlow does: a 3x3 kernel at dilation 2 spans 5x5,
  // two rows and columns on each side.
  check_gradients({"conv -> conv same dilation 2 no bias",
                   {Input({6, 6, 2}), Conv2D(3, 2, "tanh"),
                    Conv2D(4, 3, "linear", 1, "same", false, 2), Flatten(), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {6, 6, 2}});
  // A 3x2 kernel at (2, 3) spans 5x4: rows padded 2 and 2, columns 1 and 2 (the odd one at the
  // right); first layer and after another.
  check_gradients(
      {"conv same dilation (2, 3) -> conv same dilation (2, 3)",
       {Input({5, 6, 2}), Conv2D(3, {3, 2}, "tanh", 1, "same", true, {2, 3}),
        Conv2D(2, {3, 2}, "relu", 1, "same", true, {2, 3}), Flatten(), Dense(3, "softmax")},
       "categorical_crossentropy",
       {5, 6, 2}});
}

TEST(Gradients, MaxPooling2DMatchesFiniteDifferences) {
  check_gradients(
      {"max pool 2 valid",
       {Input({7, 7, 2}), Conv2D(3, 2, "tanh"), MaxPooling2D(2), Flatten(), Dense(3, "softmax")},
       "sparse_categorical_crossentropy",
       {7, 7, 2}});
  check_gradients({"max pool 3 stride 2 same",
                   {Input({6, 6, 2}), Conv2D(3, 2, "linear"), MaxPooling2D(3, 2, "same"), Flatten(),
                    Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {6, 6, 2}});
}

TEST(Gradients, AveragePoolingMatchesFiniteDifferences) {
  check_gradients({"average pool 2 stride 1 same",
                   {Input({5, 5, 2}), Conv2D(3, 2, "tanh"), AveragePooling2D(2, 1, "same"),
                    Flatten(), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {5, 5, 2}});
  check_gradients({"global average pool",
                   {Input({5, 5, 2}), Conv2D(4, 3, "relu", 1, "same"), GlobalAveragePooling2D(),
                    Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {5, 5, 2}});
}

TEST(Gradients, GlobalMaxPoolingMatchesFiniteDifferences) {
  // Each channel's gradient goes to the one position that held its maximum (tanh keeps ties
  // away); a 'same' conv first, so that the maxima move between the channels' positions.
  check_gradients({"global max pool",
                   {Input({5, 5, 2}), Conv2D(4, 3, "tanh", 1, "same"), GlobalMaxPooling2D(),
                    Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {5, 5, 2}});
  check_gradients({"global max pool of an odd image, mse",
                   {Input({7, 5, 3}), Conv2D(2, 2, "linear"), GlobalMaxPooling2D(), Dense(2)},
                   "mean_squared_error",
                   {7, 5, 3}});
}

TEST(Gradients, UpSampling2DBetweenConvolutionsMatchesFiniteDifferences) {
  // Its backward sums each block into the conv below it, whose kernel's gradient reads it.
  check_gradients({"conv -> upsample 2 -> conv",
                   {Input({4, 4, 2}), Conv2D(3, 2, "tanh"), UpSampling2D(), Conv2D(2, 3, "tanh"),
                    Flatten(), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {4, 4, 2}});
  // An autoencoder's decoder end: pooled, upsampled by (2, 3), a 'same' sigmoid conv, mse.
  check_gradients({"pool -> upsample 2x3 -> same conv, mse",
                   {Input({6, 6, 1}), Conv2D(2, 3, "tanh", 1, "same"), MaxPooling2D(2),
                    UpSampling2D({2, 3}), Conv2D(1, 3, "sigmoid", 1, "same"), Flatten()},
                   "mean_squared_error",
                   {6, 6, 1}});
}

TEST(Gradients, ZeroPadding2DAndCropping2DBetweenConvolutionsMatchFiniteDifferences) {
  // Padding's backward crops the gradient into the conv below; cropping's pads it with zeros.
  check_gradients({"conv -> zero padding ((1, 2), (0, 1)) -> conv",
                   {Input({4, 3, 2}), Conv2D(3, 2, "tanh"), ZeroPadding2D({1, 2, 0, 1}),
                    Conv2D(2, 3, "tanh"), Flatten(), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {4, 3, 2}});
  check_gradients({"conv -> cropping ((1, 0), (2, 1)) -> conv, mse",
                   {Input({6, 7, 1}), Conv2D(2, 2, "tanh"), Cropping2D({1, 0, 2, 1}),
                    Conv2D(1, 2, "sigmoid"), Flatten()},
                   "mean_squared_error",
                   {6, 7, 1}});
  // Padding first: no input gradient is needed.
  check_gradients({"zero padding first, then cropping",
                   {Input({3, 3, 2}), ZeroPadding2D(), Cropping2D({0, 1, 1, 0}),
                    Conv2D(2, 2, "tanh"), Flatten(), Dense(2, "softmax")},
                   "sparse_categorical_crossentropy",
                   {3, 3, 2}});
}

TEST(Gradients, ZeroPadding1DAndCropping1DMatchFiniteDifferences) {
  // On (steps, features) samples between weights: a Dense reshaped into steps below them.
  check_gradients({"dense -> reshape (4, 3) -> zero padding (1, 2) -> cropping (2, 0) -> dense",
                   {Input({6}), Dense(12, "tanh"), Reshape({4, 3}), ZeroPadding1D(1, 2),
                    Cropping1D(2, 0), Flatten(), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {6}});
  check_gradients({"cropping (1, 1) -> padding (0, 3), mse",
                   {Input({5}), Dense(10, "sigmoid"), Reshape({5, 2}), Cropping1D(),
                    ZeroPadding1D(0, 3), Flatten()},
                   "mean_squared_error",
                   {5}});
}

TEST(Gradients, NoiseLayersInTrainingMatchFiniteDifferencesOfTheirDraws) {
  // GaussianDropout's gradient is multiplied by its noise, SpatialDropout2D's by its channels'
  // factors, GaussianNoise's is the identity (its noise shifts the tanh above it): each checked
  // on a training pass against the reference drawing the same noise.
  check_gradients({"dense -> gaussian dropout 0.3 -> dense",
                   {Input({5}), Dense(6, "tanh"), GaussianDropout(0.3), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy"});
  check_gradients({"dense -> gaussian noise 0.5 -> dense tanh, mse",
                   {Input({5}), Dense(6), GaussianNoise(0.5), Dense(4, "tanh"), Dense(2)},
                   "mean_squared_error"});
  check_gradients({"conv -> spatial dropout 0.5 -> conv",
                   {Input({5, 5, 2}), Conv2D(4, 2, "tanh"), SpatialDropout2D(0.5),
                    Conv2D(2, 2, "tanh"), Flatten(), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {5, 5, 2}});
  // All three at once, the first one first in the model (no input gradient needed), after relu.
  check_gradients({"noise first, then relu -> spatial dropout -> gaussian dropout",
                   {Input({4, 4, 3}), GaussianNoise(0.2), Conv2D(3, 2, "relu"),
                    SpatialDropout2D(0.3), GaussianDropout(0.2), Flatten(), Dense(2, "softmax")},
                   "sparse_categorical_crossentropy",
                   {4, 4, 3}});
  // At 0 they draw nothing: gradients() takes them (the identity).
  check_gradients(
      {"rates 0",
       {Input({5}), GaussianNoise(0), Dense(4, "tanh"), GaussianDropout(0), Dense(3, "softmax")},
       "sparse_categorical_crossentropy"});
}

TEST(Gradients, PermuteAndRepeatVectorMatchFiniteDifferences) {
  // Permute's backward is the inverse permutation: a 2-D transpose, a 3-D one into a conv, a 4-D
  // one.
  check_gradients({"dense -> reshape (4, 3) -> permute (2, 1)",
                   {Input({5}), Dense(12, "tanh"), Reshape({4, 3}), Permute({2, 1}), Flatten(),
                    Dense(3, "softmax")},
                   "sparse_categorical_crossentropy"});
  check_gradients({"conv -> permute (2, 3, 1) -> conv",
                   {Input({4, 3, 2}), Conv2D(3, 2, "tanh"), Permute({2, 3, 1}),
                    Conv2D(2, 2, "tanh"), Flatten(), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {4, 3, 2}});
  check_gradients({"dense -> reshape (2, 3, 2, 2) -> permute (4, 1, 3, 2), mse",
                   {Input({5}), Dense(24, "tanh"), Reshape({2, 3, 2, 2}), Permute({4, 1, 3, 2}),
                    Flatten(), Dense(2)},
                   "mean_squared_error"});
  // RepeatVector's backward sums the n copies' gradients (each weighted differently by the
  // Dense after the Flatten); 5 copies take three doubling copies forward.
  check_gradients({"dense -> repeat vector 5 -> flatten -> dense",
                   {Input({5}), Dense(4, "tanh"), RepeatVector(5), Flatten(), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy"});
  check_gradients({"dense -> repeat vector 3 -> permute (2, 1) -> conv as rows, mse",
                   {Input({5}), Dense(4, "tanh"), RepeatVector(3), Permute({2, 1}),
                    Reshape({4, 3, 1}), Conv2D(2, 2, "sigmoid"), Flatten()},
                   "mean_squared_error"});
}

TEST(Gradients, Conv2DTransposeMatchesFiniteDifferences) {
  // Valid, stride 1, with bias: (4, 4) -> (6, 6).
  check_gradients(
      {"conv transpose valid s1 tanh",
       {Input({4, 4, 2}), Conv2DTranspose(3, 3, "tanh"), Flatten(), Dense(3, "softmax")},
       "sparse_categorical_crossentropy",
       {4, 4, 2}});
  // Its input gradient (after a Conv2D), 'same' with stride 2 and an even kernel: one row of
  // padding before; no bias.
  check_gradients(
      {"conv -> conv transpose same s2 4x4",
       {Input({5, 5, 2}), Conv2D(3, 2, "tanh"), Conv2DTranspose(2, 4, "linear", 2, "same", false),
        Flatten(), Dense(3, "softmax")},
       "sparse_categorical_crossentropy",
       {5, 5, 2}});
  // A stride larger than the kernel ('valid': (in - 1) * 3 + 3, the last row only the bias), then
  // a 'same' stride 2 kernel 3 (the extra padding after), an autoencoder's sigmoid end, mse.
  check_gradients({"conv transpose valid s3 k2 -> same s2 k3, mse",
                   {Input({3, 3, 1}), Conv2D(2, 2, "relu"), Conv2DTranspose(2, 2, "elu", 3),
                    Conv2DTranspose(1, 3, "sigmoid", 2, "same"), Flatten()},
                   "mean_squared_error",
                   {3, 3, 1}});
}

TEST(Gradients, DilatedConv2DTransposeMatchesFiniteDifferences) {
  // dilation_rate 2, 'valid': a 3x3 kernel spans 5x5, (3, 3) -> (7, 7).
  check_gradients({"conv transpose valid dilation 2 tanh",
                   {Input({3, 3, 2}), Conv2DTranspose(3, 3, "tanh", 1, "valid", true, 2), Flatten(),
                    Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {3, 3, 2}});
  // (2, 3), 'same', after a Conv2D (its input gradient): a 3x2 kernel spans 5x4, padded 2 and 2
  // rows, 1 and 2 columns; no bias.
  check_gradients({"conv -> conv transpose same dilation (2, 3)",
                   {Input({5, 6, 2}), Conv2D(3, 2, "tanh"),
                    Conv2DTranspose(2, {3, 2}, "linear", 1, "same", false, {2, 3}), Flatten(),
                    Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {5, 6, 2}});
}

TEST(Gradients, ASmallConvnetMatchesFiniteDifferences) {
  // The reference convnet's structure, small: conv, pool, conv, pool, flatten, dropout, dense.
  check_gradients({"small convnet",
                   {Input({10, 10, 1}), Conv2D(3, 3, "relu"), MaxPooling2D(2), Conv2D(4, 3, "relu"),
                    MaxPooling2D(2), Flatten(), Dropout(0.0), Dense(3, "softmax")},
                   "categorical_crossentropy",
                   {10, 10, 1}});
}

TEST(Gradients, ReshapeBetweenDenseAndConv2DMatchesFiniteDifferences) {
  check_gradients({"dense -> reshape -> conv",
                   {Input({5}), Dense(18, "tanh"), Reshape({3, 3, 2}), Conv2D(2, 2, "tanh"),
                    Flatten(), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy"});
}

// ---- batch normalization (in training: the batch's statistics, through which dx flows) ----

TEST(Gradients, BatchNormalizationAfterDenseMatchesFiniteDifferences) {
  check_gradients({"dense -> batch norm -> dense",
                   {Input({5}), Dense(4, "tanh"), BatchNormalization(), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy"});
}

TEST(Gradients, BatchNormalizationWithoutCenterOrScaleMatchesFiniteDifferences) {
  check_gradients({"no center",
                   {Input({5}), Dense(4), BatchNormalization(0.99, 1e-3, false, true),
                    Activation("relu"), Dense(3, "softmax")},
                   "categorical_crossentropy"});
  check_gradients(
      {"no scale, last layer",
       {Input({5}), Dense(4, "tanh"), Dense(3), BatchNormalization(0.9, 1e-2, true, false)},
       "mean_squared_error"});
  check_gradients({"neither",
                   {Input({5}), Dense(4, "tanh"), BatchNormalization(0.99, 1e-3, false, false),
                    Dense(3, "softmax")},
                   "sparse_categorical_crossentropy"});
}

TEST(Gradients, BatchNormalizationOverImageChannelsMatchesFiniteDifferences) {
  // Statistics per channel over every sample and position; as the first layer, its input
  // gradient is not needed but its gamma and beta are.
  check_gradients({"conv -> batch norm -> pool",
                   {Input({5, 5, 2}), Conv2D(3, 2), BatchNormalization(), Activation("relu"),
                    MaxPooling2D(2), Flatten(), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {5, 5, 2}});
  check_gradients({"batch norm first",
                   {Input({3, 3, 2}), BatchNormalization(), Flatten(), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {3, 3, 2}});
}

// ---- layer normalization (each sample's own statistics, through which dx flows: the Dense
// below it checks the input gradient, gamma and beta their own) ----

TEST(Gradients, LayerNormalizationAfterDenseMatchesFiniteDifferences) {
  check_gradients({"dense -> layer norm -> dense",
                   {Input({5}), Dense(4, "tanh"), LayerNormalization(), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy"});
  check_gradients({"no center, relu after",
                   {Input({5}), Dense(6), LayerNormalization(1e-2, false, true), Activation("relu"),
                    Dense(3, "softmax")},
                   "categorical_crossentropy"});
  check_gradients({"no scale, last layer",
                   {Input({5}), Dense(4, "tanh"), Dense(3), LayerNormalization(1e-3, true, false)},
                   "mean_squared_error"});
  check_gradients(
      {"neither",
       {Input({5}), Dense(4, "tanh"), LayerNormalization(1e-3, false, false), Dense(3, "softmax")},
       "sparse_categorical_crossentropy"});
}

TEST(Gradients, LayerNormalizationOverImageChannelsMatchesFiniteDifferences) {
  // Over the channels of every position: (4 x 4) rows of 3 per sample.
  check_gradients({"conv -> layer norm -> dense",
                   {Input({5, 5, 2}), Conv2D(3, 2), LayerNormalization(), Activation("relu"),
                    Flatten(), Dense(3, "softmax")},
                   "sparse_categorical_crossentropy",
                   {5, 5, 2}});
}

// The backend's conv2d_forward itself against the float64 loop, with explicit uneven padding and
// strides, both fused activations, with and without bias.
TEST(CpuBackend, Conv2DForwardMatchesTheFloat64Loop) {
  std::unique_ptr<Backend> be = make_cpu_backend(2);
  uint64_t seed = 70;
  struct Setup {
    Layer layer;
    Shape in;
  };
  for (const Setup& c : {Setup{Conv2D(5, 3, "relu"), {9, 8, 3}},
                         Setup{Conv2D(4, {2, 3}, "linear", {2, 1}, "same"), {7, 6, 2}},
                         Setup{Conv2D(32, 3, "relu", 1, "valid", false), {28, 28, 1}},
                         Setup{Conv2D(3, 3, "relu", 1, "valid", true, 2), {9, 8, 3}},
                         Setup{Conv2D(4, {3, 2}, "linear", 1, "same", true, {2, 3}), {7, 6, 2}}}) {
    const ConvArgs& l = c.layer.args<ConvArgs>();
    SCOPED_TRACE(shape_to_string(c.in) + " kernel " + std::to_string(l.kernel_size.h) + "x" +
                 std::to_string(l.kernel_size.w) + " dilation " +
                 std::to_string(l.dilation_rate.h) + "x" + std::to_string(l.dilation_rate.w) + " " +
                 std::string(padding_name(l.padding)));
    const int64_t m = 3, in_size = c.in[0] * c.in[1] * c.in[2];
    const int64_t span_h = (l.kernel_size.h - 1) * l.dilation_rate.h + 1,
                  span_w = (l.kernel_size.w - 1) * l.dilation_rate.w + 1;
    const Span sh = keras_span(c.in[0], span_h, l.strides.h, l.padding);
    const Span sw = keras_span(c.in[1], span_w, l.strides.w, l.padding);
    ConvShape s;
    s.in_h = c.in[0], s.in_w = c.in[1], s.in_c = c.in[2];
    s.out_h = sh.out, s.out_w = sw.out, s.out_c = l.filters;
    s.kernel_h = l.kernel_size.h, s.kernel_w = l.kernel_size.w;
    s.stride_h = l.strides.h, s.stride_w = l.strides.w;
    s.dilation_h = l.dilation_rate.h, s.dilation_w = l.dilation_rate.w;
    s.pad_top = sh.before, s.pad_left = sw.before;
    s.pad_bottom = std::max<int64_t>((sh.out - 1) * l.strides.h + span_h - c.in[0], 0) - sh.before;
    s.pad_right = std::max<int64_t>((sw.out - 1) * l.strides.w + span_w - c.in[1], 0) - sw.before;
    const Tensor x = random_tensor({m, c.in[0], c.in[1], c.in[2]}, ++seed);
    const Tensor k = random_tensor({l.kernel_size.h, l.kernel_size.w, c.in[2], l.filters}, ++seed);
    const Tensor b = random_tensor({l.filters}, ++seed);
    const int64_t out_size = sh.out * sw.out * l.filters;
    std::vector<float> y(static_cast<std::size_t>(m * out_size), std::nanf(""));
    be->conv2d_forward(s, x.data(), k.data(), l.use_bias ? b.data() : nullptr, y.data(), m,
                       l.activation.kind);
    const Vec kernel(k.values().begin(), k.values().end()),
        bias(b.values().begin(), b.values().end());
    for (int64_t r = 0; r < m; ++r) {
      Vec h(x.data() + r * in_size, x.data() + (r + 1) * in_size);
      Shape shape = c.in;
      conv_reference(h, shape, l, kernel, l.use_bias ? &bias : nullptr);
      ASSERT_EQ(shape_size(shape), out_size);
      for (int64_t j = 0; j < out_size; ++j)
        ASSERT_NEAR(y[static_cast<std::size_t>(r * out_size + j)], h[static_cast<std::size_t>(j)],
                    1e-5 + 1e-5 * std::abs(h[static_cast<std::size_t>(j)]))
            << "sample " << r << " element " << j;
    }
  }
}

// Ties in a max-pooling window: the whole gradient goes to one element, the window's first (in
// row-major order), as TensorFlow's MaxPoolGrad does; none is split or duplicated.
TEST(CpuBackend, MaxPoolingGivesATiedWindowsGradientToItsFirstElement) {
  std::unique_ptr<Backend> be = make_cpu_backend(1);
  PoolShape s;
  s.kind = PoolKind::max;
  s.in_h = 4, s.in_w = 4, s.channels = 2, s.out_h = 2, s.out_w = 2;
  s.window_h = s.window_w = s.stride_h = s.stride_w = 2;
  const int64_t m = 2;
  std::vector<float> x(static_cast<std::size_t>(m * 4 * 4 * 2), 0.5f), y(m * 2 * 2 * 2),
      dy(m * 2 * 2 * 2, 1.0f), dx(x.size(), std::nanf(""));
  std::vector<unsigned char> ws(be->pool2d_workspace_bytes(s, m));
  be->pool2d_forward(s, x.data(), y.data(), ws.data(), m);
  be->pool2d_backward(s, dy.data(), ws.data(), dx.data(), m);
  for (float v : y) EXPECT_EQ(v, 0.5f);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t iy = 0; iy < 4; ++iy)
      for (int64_t ix = 0; ix < 4; ++ix)
        for (int64_t c = 0; c < 2; ++c) {
          const bool first = iy % 2 == 0 && ix % 2 == 0;
          EXPECT_EQ(dx[static_cast<std::size_t>(((r * 4 + iy) * 4 + ix) * 2 + c)],
                    first ? 1.0f : 0.0f)
              << "sample " << r << " (" << iy << ", " << ix << ") channel " << c;
        }
}

}  // namespace
}  // namespace crossover

namespace crossover {
namespace {

// ---- functional models: a skip connection (Add), Concatenate, a layer read twice ----

TEST(Gradients, ASkipConnectionWithAddMatchesFiniteDifferences) {
  // Input -> Dense -> Dense -> Add with the first Dense's output -> Dense softmax.
  GraphBuilder g;
  const int x = g.input({5});
  const int d1 = g.add(Dense(4, "tanh"), x);
  const int d2 = g.add(Dense(4, "relu"), d1);
  const int sum = g.add(Add(), {d2, d1});
  check_gradients({"skip",
                   {},
                   "sparse_categorical_crossentropy",
                   {5},
                   false,
                   g.graph(g.add(Dense(3, "softmax"), sum))});
}

TEST(Gradients, ConcatenateOfTwoBranchesMatchesFiniteDifferences) {
  GraphBuilder g;
  const int x = g.input({5});
  const int a = g.add(Dense(3, "tanh"), x);
  const int b = g.add(Dense(2, "sigmoid"), x);
  const int joined = g.add(Concatenate(), {a, b});
  check_gradients({"concat",
                   {},
                   "categorical_crossentropy",
                   {5},
                   false,
                   g.graph(g.add(Dense(3, "softmax"), joined))});
}

TEST(Gradients, ALayerOutputReadThreeTimesAndImagesConcatenatedMatchFiniteDifferences) {
  // A relu output read by a dropout, an Add and a Concatenate: its gradients are summed; the
  // dropout may not fuse the relu's gradient (it is not the only reader).
  GraphBuilder g;
  const int x = g.input({4, 4, 1});
  const int c1 = g.add(Conv2D(2, 3, "relu", 1, "same"), x);
  const int c2 = g.add(Conv2D(3, 3, "tanh", 1, "same"), c1);
  const int drop = g.add(Dropout(0.0), c1);
  const int sum = g.add(Add(), {drop, c1});
  const int joined = g.add(Concatenate(), {sum, c2, c1});
  const int flat = g.add(Flatten(), joined);
  check_gradients({"images",
                   {},
                   "sparse_categorical_crossentropy",
                   {4, 4, 1},
                   false,
                   g.graph(g.add(Dense(3, "softmax"), flat))});
}

TEST(Gradients, TwoInputsInTheirOwnOrderMatchFiniteDifferences) {
  // keras.Model([b, a], ...): the packed row holds b's 2 values, then a's 3; a through two Dense
  // layers, b joined to it by a Concatenate, then Dense softmax.
  GraphBuilder g;
  const int a = g.input({3}, "a");
  const int da = g.add(Dense(4, "tanh"), a);
  const int b = g.input({2}, "b");
  const int joined = g.add(Concatenate(), {g.add(Dense(3, "relu"), da), b});
  const LayerGraph graph = g.graph(g.add(Dense(3, "softmax"), joined), {b, a});
  ASSERT_EQ(graph.input_layers, (std::vector<int>{2, 0}));
  check_gradients({"two inputs", {}, "sparse_categorical_crossentropy", {5}, false, graph});
}

TEST(Gradients, ThreeInputsAddedAndConcatenatedMatchFiniteDifferences) {
  GraphBuilder g;
  const int a = g.input({4});
  const int b = g.input({4});
  const int c = g.input({2, 2});
  const int sum = g.add(Add(), {g.add(Dense(3, "tanh"), a), g.add(Dense(3, "sigmoid"), b)});
  const int joined = g.add(Concatenate(), {sum, g.add(Flatten(), c), b});
  check_gradients({"three inputs",
                   {},
                   "mean_squared_error",
                   {12},
                   false,
                   g.graph(g.add(Dense(2, "sigmoid"), joined))});
}

TEST(Gradients, AnInputReadByTwoBranchesNeedsNoInputGradient) {
  GraphBuilder g;
  const int x = g.input({5});
  const int sum = g.add(Add(), {g.add(Dense(3), x), g.add(Dense(3, "relu"), x)});
  check_gradients({"two from the input",
                   {},
                   "mean_squared_error",
                   {5},
                   false,
                   g.graph(g.add(Activation("sigmoid"), sum))});
}

// ---- a layer called more than once (shared weights): its gradient is the sum over its calls ----

TEST(Gradients, ADenseLayerCalledThreeTimesMatchesFiniteDifferences) {
  // d(x), d(d(x)) added, then d again on the sum: three calls of one kernel and bias.
  GraphBuilder g;
  const int x = g.input({5});
  const int a = g.add(Dense(5, "tanh"), x);
  const int b = g.again(a, a);
  const int c = g.again(a, g.add(Add(), {a, b}));
  const LayerGraph graph = g.graph(g.add(Dense(3, "softmax"), c));
  ASSERT_EQ(graph.shared_with, (std::vector<int>{-1, -1, 1, -1, 1, -1}));
  check_gradients({"dense x3", {}, "sparse_categorical_crossentropy", {5}, false, graph});
}

TEST(Gradients, ASharedLayerWithoutWeightsCalledTwiceMatchesFiniteDifferences) {
  // One Activation called on two tensors: nothing to sum, each call its own gradient.
  GraphBuilder g;
  const int x = g.input({5});
  const int act = g.add(Activation("tanh"), g.add(Dense(4), x));
  const int again = g.again(act, g.add(Dense(4), act));
  check_gradients({"shared activation",
                   {},
                   "sparse_categorical_crossentropy",
                   {5},
                   false,
                   g.graph(g.add(Dense(3, "softmax"), again))});
}

TEST(Gradients, ASharedConv2DOnTwoBranchesMatchesFiniteDifferences) {
  // One Conv2D on the input and on a pooled-then-upsampled copy of it (a siamese pair).
  GraphBuilder g;
  const int x = g.input({4, 4, 1});
  const int c1 = g.add(Conv2D(2, 3, "relu", 1, "same"), x);
  const int up = g.add(UpSampling2D(2), g.add(AveragePooling2D(2), x));
  const int c2 = g.again(c1, up);
  const int joined = g.add(Concatenate(), {c1, c2});
  check_gradients({"siamese conv",
                   {},
                   "mean_squared_error",
                   {4, 4, 1},
                   false,
                   g.graph(g.add(Dense(2, "sigmoid"), g.add(Flatten(), joined)))});
}

// ---- the ops of a custom layer's call() and the element-wise merging layers ----

TEST(Gradients, AnAntirectifierOfTracedOpsMatchesFiniteDifferences) {
  // Keras's antirectifier example as crossover traces it: x - mean(x, keepdims), relu of it and
  // of its negation (x * -1), joined, then x . w + b with a custom layer's own weights.
  GraphBuilder g;
  const int x = g.input({5});
  const int d = g.add(Dense(4, "tanh"), x);
  const int mean = g.add(ReduceLastAxis(true), d);
  const int centered = g.add(BinaryOpLayer(BinaryOp::subtract), {d, mean});
  const int pos = g.add(Activation("relu"), centered);
  const int negated = g.add(ConstantOp(BinaryOp::multiply, -1.0), centered);
  const int neg = g.add(Activation("relu"), negated);
  const int joined = g.add(Concatenate(), {pos, neg});
  Layer matmul = Dense(3, "linear", false);
  matmul.args<DenseArgs>().weight_name = "w";
  const int product = g.add(matmul, joined);
  const int biased = g.add(WeightOp(BinaryOp::add, {3}, RandomNormal(0.0, 0.5), "b"), product);
  check_gradients({"antirectifier",
                   {},
                   "sparse_categorical_crossentropy",
                   {5},
                   false,
                   g.graph(g.add(Activation("softmax"), biased))});
}

TEST(Gradients, EachElementWiseOpWithBroadcastingMatchesFiniteDifferences) {
  GraphBuilder g;
  const int x = g.input({5});
  const int a = g.add(Dense(4, "tanh"), x);
  const int b = g.add(Dense(4, "sigmoid"), x);
  const int m1 = g.add(Multiply(), {a, b});
  const int m2 = g.add(Maximum(), {m1, a});
  const int m3 = g.add(Minimum(), {m2, b});
  const int m4 = g.add(Average(), {m3, a});
  const int m5 = g.add(Subtract(), {m4, b});
  const int q = g.add(BinaryOpLayer(BinaryOp::divide), {m5, b});
  const int sum = g.add(ReduceLastAxis(false), q);
  const int scaled = g.add(BinaryOpLayer(BinaryOp::multiply), {sum, q});  // (n, 1) * (n, 4)
  const int weighted =
      g.add(WeightOp(BinaryOp::divide, {1}, RandomNormal(2.0, 0.1), "s", true, true), scaled);
  const int shifted = g.add(ConstantOp(BinaryOp::subtract, 2.0, true), weighted);  // 2 - x
  const int added = g.add(BinaryOpLayer(BinaryOp::add), {shifted, a});
  check_gradients({"element-wise",
                   {},
                   "mean_squared_error",
                   {5},
                   false,
                   g.graph(g.add(Dense(3, "sigmoid"), added))});
}

// A siamese distance as Keras's examples trace it (a Lambda of ops.sqrt(ops.maximum(ops.sum(
// ops.square(x - y), axis=1, keepdims=True), epsilon))): x * x of one tensor, a constant maximum
// and the square root.
TEST(Gradients, ATracedEuclideanDistanceMatchesFiniteDifferences) {
  GraphBuilder g;
  const int x = g.input({5});
  const int a = g.add(Dense(4, "sigmoid"), x);
  const int b = g.add(Dense(4, "tanh"), x);
  const int diff = g.add(BinaryOpLayer(BinaryOp::subtract), {a, b});
  const int square = g.add(BinaryOpLayer(BinaryOp::multiply), {diff, diff});
  const int sum = g.add(ReduceLastAxis(false), square);
  const int floor = g.add(ConstantOp(BinaryOp::maximum, 1e-7), sum);
  const int distance = g.add(Sqrt(), floor);
  check_gradients({"euclidean distance",
                   {},
                   "mean_squared_error",
                   {5},
                   false,
                   g.graph(g.add(Dense(2, "sigmoid"), g.add(Concatenate(), {distance, a})))});
}

}  // namespace
}  // namespace crossover
