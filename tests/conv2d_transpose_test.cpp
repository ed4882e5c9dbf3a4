// Conv2DTranspose as a Keras user meets it: its output sizes (Keras's, output_padding None), its
// weights, the CPU kernels against a float64 evaluation of the definition (forward with bias,
// input and kernel gradients), the files, the Keras JSON (in, out, refused) and the op list. (Its
// gradient in a model: gradient_test.cpp; against Keras itself:
// tests/python/test_conv2d_transpose_peers.py.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "formats/model_config.h"
#include "formats/weights_io.h"
#include "nn/layers.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "perf/cost_model.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::error_of;
using testing_util::random_tensor;

// ---- shapes and arguments ----

TEST(Conv2DTranspose, OutputSizesAreKerasesAndTheKernelIsFiltersByInputChannels) {
  Sequential model({Input({4, 5, 2}), Conv2DTranspose(3, 3), Conv2DTranspose(2, 2, "relu", 3),
                    Conv2DTranspose(4, {3, 2}, "linear", 2, "same", false)});
  model.compile(Adam(), "mean_squared_error", {}, {.threads = 1});
  const std::vector<Shape> shapes = model.layer_output_shapes();
  // valid, stride 1: in + kernel - 1; valid, stride 3 > kernel 2: in * 3; same: in * stride.
  EXPECT_EQ(shapes[1], (Shape{6, 7, 3}));
  EXPECT_EQ(shapes[2], (Shape{18, 21, 2}));
  EXPECT_EQ(shapes[3], (Shape{36, 42, 4}));
  const std::vector<NamedTensor> w = model.get_weights();
  ASSERT_EQ(w.size(), 5u);
  EXPECT_EQ(w[0].name, "conv2d_transpose/kernel");
  EXPECT_EQ(w[0].value.shape(), (Shape{3, 3, 3, 2}));
  EXPECT_EQ(w[1].name, "conv2d_transpose/bias");
  EXPECT_EQ(w[1].value.shape(), (Shape{3}));
  EXPECT_EQ(w[2].value.shape(), (Shape{2, 2, 2, 3}));
  EXPECT_EQ(w[4].name, "conv2d_transpose_2/kernel");
  EXPECT_EQ(w[4].value.shape(), (Shape{3, 2, 4, 2}));
  EXPECT_NE(model.summary().find("conv2d_transpose (Conv2DTranspose)"), std::string::npos);
}

TEST(Conv2DTranspose, DilationRateSizesTheOutputForTheKernelsDilatedSpanAsKerasDoes) {
  // Keras 3.15's shapes: a 2x3 kernel at (2, 3) spans 3x7; 'valid' in + span - 1, 'same' in.
  Sequential model({Input({7, 8, 2}),
                    Conv2DTranspose(3, {2, 3}, "linear", 1, "valid", true, {2, 3}),
                    Conv2DTranspose(2, 3, "linear", 1, "same", true, 2)});
  const std::vector<Shape> shapes = model.layer_output_shapes();
  EXPECT_EQ(shapes[1], (Shape{9, 14, 3}));
  EXPECT_EQ(shapes[2], (Shape{9, 14, 2}));
  EXPECT_EQ(model.count_params(), (2 * 3 * 3 * 2 + 3) + (3 * 3 * 2 * 3 + 2));
}

TEST(Conv2DTranspose, BadArgumentsAndInputsAreRefusedNamingTheLayer) {
  EXPECT_EQ(error_of([] { Conv2DTranspose(0, 3); }),
            "Conv2DTranspose: filters must be at least 1, got 0");
  EXPECT_EQ(error_of([] {
              Conv2DTranspose(2, {3, 0});
            }),
            "Conv2DTranspose: kernel_size must be at least 1, got (3, 0)");
  EXPECT_NE(error_of([] { Conv2DTranspose(2, 3, "linear", 1, "full"); }).find("full"),
            std::string::npos);
  EXPECT_EQ(error_of([] {
              Sequential({Input({6}), Conv2DTranspose(2, 3), Flatten(), Dense(2)});
            }),
            "conv2d_transpose: Conv2DTranspose needs samples of shape (height, width, channels), "
            "but receives (6,)");
}

// ---- the CPU kernels against the definition, in float64 ----

struct Geometry {
  int64_t m, h, w, c, filters, kernel_h, kernel_w, stride;
  Padding padding;
  int64_t dilation = 1;  // both axes; Keras allows it above 1 only at stride 1
  int64_t span_h() const { return (kernel_h - 1) * dilation + 1; }
  int64_t span_w() const { return (kernel_w - 1) * dilation + 1; }
};

// k: the kernel's dilated span.
int64_t out_length(int64_t in, int64_t k, int64_t s, Padding p) {
  return p == Padding::same ? in * s : (in - 1) * s + std::max(k, s);
}
int64_t before(int64_t k, int64_t s, Padding p) {
  return p == Padding::same ? std::max<int64_t>(k - s, 0) / 2 : 0;
}

// The convolution a transposed one transposes, as backends/backend_ops.h takes it.
ConvShape transposed_conv_shape(const Geometry& g) {
  ConvShape s;
  s.in_h = out_length(g.h, g.span_h(), g.stride, g.padding);
  s.in_w = out_length(g.w, g.span_w(), g.stride, g.padding);
  s.in_c = g.filters;
  s.out_h = g.h, s.out_w = g.w, s.out_c = g.c;
  s.kernel_h = g.kernel_h, s.kernel_w = g.kernel_w;
  s.stride_h = s.stride_w = g.stride;
  s.dilation_h = s.dilation_w = g.dilation;
  if (g.padding == Padding::same) {
    const int64_t th = std::max<int64_t>(g.span_h() - g.stride, 0);
    const int64_t tw = std::max<int64_t>(g.span_w() - g.stride, 0);
    s.pad_top = th / 2, s.pad_bottom = th - th / 2;
    s.pad_left = tw / 2, s.pad_right = tw - tw / 2;
  }
  return s;
}

TEST(CpuBackend, ConvTransposeForwardAndGradientsMatchTheFloat64Definition) {
  for (const Geometry& g : {Geometry{2, 3, 4, 2, 3, 3, 3, 1, Padding::valid},
                            Geometry{3, 4, 3, 3, 2, 3, 3, 2, Padding::same},
                            Geometry{2, 3, 3, 1, 2, 2, 2, 3, Padding::valid},
                            Geometry{4, 7, 7, 4, 5, 4, 3, 2, Padding::same},
                            Geometry{2, 3, 4, 2, 3, 3, 3, 1, Padding::valid, 2},
                            Geometry{3, 5, 4, 3, 2, 3, 2, 1, Padding::same, 3}}) {
    SCOPED_TRACE(std::to_string(g.h) + "x" + std::to_string(g.w) + "x" + std::to_string(g.c) +
                 " kernel " + std::to_string(g.kernel_h) + "x" + std::to_string(g.kernel_w) +
                 " stride " + std::to_string(g.stride) + " dilation " + std::to_string(g.dilation));
    const ConvShape s = transposed_conv_shape(g);
    const int64_t oh = s.in_h, ow = s.in_w, f = g.filters;
    const int64_t bh = before(g.span_h(), g.stride, g.padding),
                  bw = before(g.span_w(), g.stride, g.padding);
    const Tensor x = random_tensor({g.m, g.h, g.w, g.c}, 21);
    const Tensor k = random_tensor({g.kernel_h, g.kernel_w, f, g.c}, 22);
    const Tensor b = random_tensor({f}, 23);
    const Tensor dy = random_tensor({g.m, oh, ow, f}, 24);
    std::vector<double> y(static_cast<std::size_t>(g.m * oh * ow * f), 0.0);
    std::vector<double> dx(static_cast<std::size_t>(x.size()), 0.0), dk(k.size(), 0.0);
    auto xi = [&](int64_t n, int64_t i, int64_t j, int64_t c) {
      return ((n * g.h + i) * g.w + j) * g.c + c;
    };
    auto yi = [&](int64_t n, int64_t i, int64_t j, int64_t o) {
      return ((n * oh + i) * ow + j) * f + o;
    };
    for (int64_t n = 0; n < g.m; ++n)
      for (int64_t i = 0; i < g.h; ++i)
        for (int64_t j = 0; j < g.w; ++j)
          for (int64_t p = 0; p < g.kernel_h; ++p)
            for (int64_t q = 0; q < g.kernel_w; ++q) {
              const int64_t oi = i * g.stride - bh + p * g.dilation,
                            oj = j * g.stride - bw + q * g.dilation;
              if (oi < 0 || oi >= oh || oj < 0 || oj >= ow) continue;
              for (int64_t o = 0; o < f; ++o)
                for (int64_t c = 0; c < g.c; ++c) {
                  const int64_t ki = ((p * g.kernel_w + q) * f + o) * g.c + c;
                  y[static_cast<std::size_t>(yi(n, oi, oj, o))] +=
                      double(x[xi(n, i, j, c)]) * k[ki];
                  dx[static_cast<std::size_t>(xi(n, i, j, c))] +=
                      double(dy[yi(n, oi, oj, o)]) * k[ki];
                  dk[static_cast<std::size_t>(ki)] +=
                      double(dy[yi(n, oi, oj, o)]) * x[xi(n, i, j, c)];
                }
            }
    std::vector<double> db(static_cast<std::size_t>(f), 0.0);
    for (int64_t e = 0; e < dy.size(); ++e) db[static_cast<std::size_t>(e % f)] += dy[e];
    std::unique_ptr<Backend> be = make_cpu_backend(2);
    std::vector<float> got_y(y.size(), std::nanf("")), got_dx(dx.size(), std::nanf(""));
    std::vector<float> got_dk(dk.size(), std::nanf("")), got_db(db.size(), std::nanf(""));
    be->conv2d_transpose_forward(s, x.data(), k.data(), b.data(), got_y.data(), g.m);
    be->conv2d_transpose_backward_input(s, dy.data(), k.data(), got_dx.data(), g.m);
    be->conv2d_transpose_backward_weights(s, x.data(), dy.data(), got_dk.data(), got_db.data(),
                                          g.m);
    for (std::size_t i = 0; i < y.size(); ++i)
      ASSERT_NEAR(got_y[i], y[i] + b[static_cast<int64_t>(i) % f], 1e-4) << "y " << i;
    for (std::size_t i = 0; i < dx.size(); ++i) ASSERT_NEAR(got_dx[i], dx[i], 1e-4) << "dx " << i;
    for (std::size_t i = 0; i < dk.size(); ++i) ASSERT_NEAR(got_dk[i], dk[i], 1e-4) << "dk " << i;
    for (std::size_t i = 0; i < db.size(); ++i) ASSERT_NEAR(got_db[i], db[i], 1e-4) << "db " << i;
  }
}

// ---- in a model ----

// With `flatten`, a flat output (the cost model's op list trains it with its default loss).
Sequential decoder(bool flatten = false) {
  std::vector<Layer> layers = {Input({4, 4, 2}), Conv2D(3, 3, "relu", 2, "same"),
                               Conv2DTranspose(3, 3, "relu", 2, "same"),
                               Conv2DTranspose(1, 3, "sigmoid", 1, "same")};
  if (flatten) layers.push_back(Flatten());
  return Sequential(std::move(layers));
}

TEST(Conv2DTranspose, SafetensorsAndH5RoundTripsKeepThePredictions) {
  for (const char* file : {"w.safetensors", "w.weights.h5"}) {
    SCOPED_TRACE(file);
    Sequential model = decoder();
    model.compile(Adam(), "mean_squared_error", {}, {.threads = 1, .seed = 2});
    const Tensor x = random_tensor({6, 4, 4, 2}, 3, 0.0f, 1.0f);
    const Tensor target = random_tensor({6, 4, 4, 1}, 4, 0.0f, 1.0f);
    model.fit(x, target, {.epochs = 2, .batch_size = 3, .verbose = 0});
    const std::string path = testing_util::temp_folder("convt_weights") + "/" + file;
    save_weights(model, path);
    Sequential other = decoder();
    other.compile(Adam(), "mean_squared_error", {}, {.threads = 1, .seed = 99});
    load_weights(other, path);
    const Tensor pa = model.predict(x), pb = other.predict(x);
    ASSERT_EQ(pa.shape(), (Shape{6, 4, 4, 1}));
    for (int64_t i = 0; i < pa.size(); ++i) EXPECT_EQ(pa[i], pb[i]);
  }
}

// ---- Keras JSON ----

// Keras 3.15's model JSON of Input(5, 5, 2) -> Conv2DTranspose(8, 3, strides 2, same, relu) (its
// fields as Keras 3.15's get_config writes them).
std::string keras3_json(const std::string& class_name = "Conv2DTranspose") {
  return R"({"module": "keras", "class_name": "Sequential", "config": {"name": "sequential",
    "layers": [
      {"module": "keras.layers", "class_name": "InputLayer",
       "config": {"batch_shape": [null, 5, 5, 2], "dtype": "float32", "name": "input_layer"}},
      {"module": "keras.layers", "class_name": ")" +
         class_name + R"(",
       "config": {"name": "conv2d_transpose", "trainable": true,
                  "dtype": {"module": "keras", "class_name": "DTypePolicy",
                            "config": {"name": "float32"}, "registered_name": null},
                  "filters": 8, "kernel_size": [3, 3], "strides": [2, 2], "padding": "same",
                  "output_padding": null, "data_format": "channels_last",
                  "dilation_rate": [1, 1], "activation": "relu", "use_bias": true,
                  "kernel_initializer": {"module": "keras.initializers",
                      "class_name": "GlorotUniform",
                      "config": {"seed": null, "input_axes": null, "output_axes": null},
                      "registered_name": null},
                  "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros",
                                       "config": {}, "registered_name": null},
                  "kernel_regularizer": null, "bias_regularizer": null,
                  "activity_regularizer": null, "kernel_constraint": null,
                  "bias_constraint": null},
       "registered_name": null, "build_config": {"input_shape": [null, 5, 5, 2]}}]}})";
}

TEST(Conv2DTranspose, KerasJsonAsKerasWritesItLoadsAndRoundTrips) {
  for (const char* name : {"Conv2DTranspose", "Convolution2DTranspose"}) {
    SCOPED_TRACE(name);
    Sequential m = model_from_json(keras3_json(name), "convt.json");
    ASSERT_EQ(m.layers().size(), 2u);
    const Layer& l = m.layers()[1];
    EXPECT_EQ(l.type, LayerType::conv2d_transpose);
    const ConvArgs& a = l.args<ConvArgs>();
    EXPECT_EQ(a.filters, 8);
    EXPECT_EQ(a.strides, Size2(2));
    EXPECT_EQ(a.padding, Padding::same);
    EXPECT_EQ(a.activation.kind, ActivationKind::relu);
    EXPECT_EQ(m.layer_output_shapes()[1], (Shape{10, 10, 8}));
    const Sequential back = model_from_json(model_to_json(m), "model.json");
    EXPECT_EQ(model_to_json(back), model_to_json(m));
    const auto layer = nlohmann::json::parse(model_to_json(m))["config"]["layers"][1];
    EXPECT_EQ(layer["class_name"], "Conv2DTranspose");
    EXPECT_TRUE(layer["config"]["output_padding"].is_null());
    EXPECT_EQ(layer["config"]["filters"], 8);
    EXPECT_EQ(layer["config"]["kernel_size"], nlohmann::json::parse("[3, 3]"));
    EXPECT_EQ(layer["config"]["dilation_rate"], nlohmann::json::parse("[1, 1]"));
    EXPECT_EQ(layer["build_config"]["input_shape"], nlohmann::json::parse("[null, 5, 5, 2]"));
  }
}

TEST(Conv2DTranspose, KerasJsonWithADilationRateLoadsAndWritesIt) {
  std::string json = keras3_json("Conv2DTranspose");
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"\"strides\": [2, 2]", "\"strides\": [1, 1]"},
        {"\"dilation_rate\": [1, 1]", "\"dilation_rate\": [2, 1]"},
        {"\"padding\": \"same\"", "\"padding\": \"valid\""}})
    json.replace(json.find(from), from.size(), to);
  const Sequential m = model_from_json(json, "convt.json");
  // A 3x3 kernel at (2, 1) spans 5x3: 'valid' 5 + 5 - 1 by 5 + 3 - 1.
  EXPECT_EQ(m.layer_output_shapes()[1], (Shape{9, 7, 8}));
  const auto layer = nlohmann::json::parse(model_to_json(m))["config"]["layers"][1];
  EXPECT_EQ(layer["config"]["dilation_rate"], nlohmann::json::parse("[2, 1]"));
}

TEST(Conv2DTranspose, KerasJsonWithAnUnsupportedArgumentIsRefusedNamingIt) {
  auto refusal = [](const std::string& from, const std::string& to) {
    std::string json = keras3_json();
    json.replace(json.find(from), from.size(), to);
    return error_of([&] { model_from_json(json, "convt.json"); });
  };
  EXPECT_EQ(refusal("\"output_padding\": null", "\"output_padding\": [1, 1]"),
            "convt.json: layer 'conv2d_transpose' field output_padding: output_padding is not "
            "supported: only None (Keras's default output size)");
  // The file's strides are (2, 2): Keras's own rule and words.
  EXPECT_EQ(refusal("\"dilation_rate\": [1, 1]", "\"dilation_rate\": [2, 2]"),
            "convt.json: layer 'conv2d_transpose' field dilation_rate: `strides > 1` not supported "
            "in conjunction with `dilation_rate > 1`. Received: strides=(2, 2) and "
            "dilation_rate=(2, 2)");
  EXPECT_NE(refusal("\"data_format\": \"channels_last\"", "\"data_format\": \"channels_first\"")
                .find("convt.json: layer 'conv2d_transpose' field data_format"),
            std::string::npos);
}

// ---- the op list ----

TEST(ConvTransposeCost, TheOpListHasItsThreeCallsPricedAsTheConvolutionTheyRun) {
  const perf::ModelDesc model = perf::describe(decoder(true));
  for (const perf::DeviceKind device : {perf::DeviceKind::cpu, perf::DeviceKind::gpu}) {
    std::vector<perf::Op> ops;
    for (const perf::Op& o : perf::step_ops(model, 8, device, perf::Mode::resident))
      if (o.call.rfind("conv2d_transpose_", 0) == 0 && o.layer == "conv2d_transpose")
        ops.push_back(o);
    ASSERT_EQ(ops.size(), 3u);
    EXPECT_EQ(ops[0].call, "conv2d_transpose_forward");
    EXPECT_EQ(ops[1].call, "conv2d_transpose_backward_input");
    EXPECT_EQ(ops[2].call, "conv2d_transpose_backward_weights");
    EXPECT_NE(ops[0].name.find("conv transpose forward 2x2x3->4x4x3"), std::string::npos)
        << ops[0].name;
    // 2 m out_h out_w k_h k_w in_c out_c of the convolution (4x4x3 -> 2x2x3) it transposes.
    for (const perf::Op& o : ops) EXPECT_EQ(o.flops, 2 * 8 * 2 * 2 * 9 * 3 * 3);
    EXPECT_EQ(ops[0].bytes_written, 4 * 8 * 4 * 4 * 3);
    EXPECT_EQ(perf::conv_pool_op(ops[0].call), "backward_input");
    EXPECT_EQ(perf::conv_pool_op(ops[1].call), "forward");
  }
}

}  // namespace
}  // namespace crossover
