// UpSampling2D as a Keras user meets it: its shapes and (no) weights, the CPU kernels against a
// plain loop (the forward repeats, the backward sums each block, the same bits at any thread
// count), the files, the Keras JSON (in, out, refused) and the op list. (Its gradient in a model:
// gradient_test.cpp; against Keras itself: tests/python/test_upsampling_peers.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
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

// Input(4, 4, 2) -> Conv2D(3, 3, same) -> MaxPooling2D -> UpSampling2D(size) -> Conv2D(1, 3, same)
// -> Flatten (the engine's outputs are flat).
Sequential autoencoder(Size2 size = 2) {
  return Sequential({Input({4, 4, 2}), Conv2D(3, 3, "relu", 1, "same"), MaxPooling2D(2),
                     UpSampling2D(size), Conv2D(1, 3, "sigmoid", 1, "same"), Flatten()});
}

// ---- shapes and arguments ----

TEST(UpSampling2D, MultipliesHeightAndWidthAndHasNoWeights) {
  Sequential model = autoencoder({2, 3});
  model.compile(Adam(), "mean_squared_error", {}, {.threads = 1});
  const std::vector<Shape> shapes = model.layer_output_shapes();
  ASSERT_EQ(shapes.size(), 6u);
  EXPECT_EQ(shapes[3], (Shape{4, 6, 3}));
  EXPECT_EQ(shapes[4], (Shape{4, 6, 1}));
  EXPECT_EQ(model.layers()[3].name, "up_sampling2d");
  EXPECT_EQ(model.count_params(), (3 * 3 * 2 * 3 + 3) + (3 * 3 * 3 + 1));
  EXPECT_NE(model.summary().find("up_sampling2d (UpSampling2D)"), std::string::npos)
      << model.summary();
}

TEST(UpSampling2D, BadArgumentsAndInputsAreRefusedNamingTheLayer) {
  EXPECT_EQ(error_of([] { UpSampling2D(0); }), "UpSampling2D: size must be at least 1, got (0, 0)");
  EXPECT_EQ(error_of([] { UpSampling2D(2, "bilinear"); }),
            "UpSampling2D: interpolation 'bilinear' is not supported: only 'nearest' (each value "
            "repeated over its block)");
  EXPECT_EQ(error_of([] { UpSampling2D(2, "NEAREST"); }), "");
  EXPECT_EQ(error_of([] {
              Sequential({Input({6}), UpSampling2D(), Flatten(), Dense(2)});
            }),
            "up_sampling2d: UpSampling2D needs samples of shape (height, width, channels), but "
            "receives (6,)");
}

// ---- the CPU kernels ----

struct Geometry {
  int64_t m, h, w, c, size_h, size_w;
};

PoolShape upsample_shape(const Geometry& g) {
  PoolShape s;
  s.in_h = g.h, s.in_w = g.w, s.channels = g.c;
  s.window_h = s.stride_h = g.size_h, s.window_w = s.stride_w = g.size_w;
  s.out_h = g.h * g.size_h, s.out_w = g.w * g.size_w;
  return s;
}

TEST(CpuBackend, UpsampleForwardRepeatsAndBackwardSumsEachBlock) {
  // Small, odd, one channel, and large enough for the threads to split the rows.
  for (const Geometry& g : {Geometry{1, 1, 1, 1, 2, 2}, Geometry{2, 3, 5, 3, 2, 3},
                            Geometry{3, 4, 2, 1, 1, 4}, Geometry{64, 14, 14, 8, 2, 2}}) {
    SCOPED_TRACE(std::to_string(g.m) + "x" + std::to_string(g.h) + "x" + std::to_string(g.w) + "x" +
                 std::to_string(g.c) + " by " + std::to_string(g.size_h) + "x" +
                 std::to_string(g.size_w));
    const PoolShape s = upsample_shape(g);
    const int64_t oh = s.out_h, ow = s.out_w;
    const Tensor x = random_tensor({g.m, g.h, g.w, g.c}, 11);
    const Tensor dy = random_tensor({g.m, oh, ow, g.c}, 12);
    std::vector<std::vector<float>> ys, dxs;
    for (const int threads : {1, 2}) {
      std::unique_ptr<Backend> be = make_cpu_backend(threads);
      std::vector<float> y(static_cast<std::size_t>(g.m * oh * ow * g.c), std::nanf(""));
      std::vector<float> dx(static_cast<std::size_t>(x.size()), std::nanf(""));
      be->upsample2d_forward(s, x.data(), y.data(), g.m);
      be->upsample2d_backward(s, dy.data(), dx.data(), g.m);
      ys.push_back(y);
      dxs.push_back(dx);
    }
    EXPECT_EQ(ys[0], ys[1]);
    EXPECT_EQ(dxs[0], dxs[1]);
    for (int64_t b = 0; b < g.m; ++b)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j)
          for (int64_t k = 0; k < g.c; ++k)
            ASSERT_EQ(ys[0][static_cast<std::size_t>(((b * oh + i) * ow + j) * g.c + k)],
                      x[((b * g.h + i / g.size_h) * g.w + j / g.size_w) * g.c + k]);
    for (int64_t b = 0; b < g.m; ++b)
      for (int64_t i = 0; i < g.h; ++i)
        for (int64_t j = 0; j < g.w; ++j)
          for (int64_t k = 0; k < g.c; ++k) {
            double sum = 0;
            for (int64_t p = 0; p < g.size_h; ++p)
              for (int64_t q = 0; q < g.size_w; ++q)
                sum += dy[((b * oh + i * g.size_h + p) * ow + j * g.size_w + q) * g.c + k];
            ASSERT_NEAR(dxs[0][static_cast<std::size_t>(((b * g.h + i) * g.w + j) * g.c + k)], sum,
                        1e-6);
          }
  }
}

// ---- in a model ----

TEST(UpSampling2D, PredictRepeatsEachValueOfItsInput) {
  Sequential model({Input({2, 3, 2}), UpSampling2D({3, 2}), Flatten()});
  model.compile(Adam(), "mean_squared_error", {}, {.threads = 1});
  const Tensor x = random_tensor({2, 2, 3, 2}, 3);
  const Tensor y = model.predict(x);
  ASSERT_EQ(y.dim(1), 6 * 6 * 2);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 6; ++j)
        for (int64_t k = 0; k < 2; ++k)
          EXPECT_EQ(y[((b * 6 + i) * 6 + j) * 2 + k], x[((b * 2 + i / 3) * 3 + j / 2) * 2 + k]);
}

TEST(UpSampling2D, SafetensorsAndH5RoundTripsKeepThePredictions) {
  for (const char* file : {"w.safetensors", "w.weights.h5"}) {
    SCOPED_TRACE(file);
    Sequential model = autoencoder();
    model.compile(Adam(), "mean_squared_error", {}, {.threads = 1, .seed = 2});
    const Tensor x = random_tensor({6, 4, 4, 2}, 3, 0.0f, 1.0f);
    const Tensor target = random_tensor({6, 16}, 4, 0.0f, 1.0f);
    model.fit(x, target, {.epochs = 2, .batch_size = 3, .verbose = 0});
    const std::string path = testing_util::temp_folder("up_weights") + "/" + file;
    save_weights(model, path);
    Sequential other = autoencoder();
    other.compile(Adam(), "mean_squared_error", {}, {.threads = 1, .seed = 99});
    load_weights(other, path);
    const Tensor pa = model.predict(x), pb = other.predict(x);
    ASSERT_EQ(pa.size(), 6 * 16);
    for (int64_t i = 0; i < pa.size(); ++i) EXPECT_EQ(pa[i], pb[i]);
  }
}

// ---- Keras JSON ----

// Keras 3.15's model JSON of Input(4, 4, 2) -> UpSampling2D((2, 3)) (its fields as Keras writes
// them for a built layer), then Flatten.
std::string keras3_json() {
  return R"({"module": "keras", "class_name": "Sequential", "config": {"name": "sequential",
    "layers": [
      {"module": "keras.layers", "class_name": "InputLayer",
       "config": {"batch_shape": [null, 4, 4, 2], "dtype": "float32", "name": "input_layer"}},
      {"module": "keras.layers", "class_name": "UpSampling2D",
       "config": {"name": "up_sampling2d", "trainable": true,
                  "dtype": {"module": "keras", "class_name": "DTypePolicy",
                            "config": {"name": "float32"}, "registered_name": null},
                  "size": [2, 3], "data_format": "channels_last", "interpolation": "nearest"},
       "registered_name": null, "build_config": {"input_shape": [null, 4, 4, 2]}},
      {"module": "keras.layers", "class_name": "Flatten",
       "config": {"name": "flatten", "trainable": true, "data_format": "channels_last"}}]}})";
}

TEST(UpSampling2D, KerasJsonAsKerasWritesItLoadsAndRoundTrips) {
  Sequential m = model_from_json(keras3_json(), "up.json");
  ASSERT_EQ(m.layers().size(), 3u);
  const Layer& l = m.layers()[1];
  EXPECT_EQ(l.type, LayerType::up_sampling2d);
  EXPECT_EQ(l.args<UpSamplingArgs>().size, Size2(2, 3));
  EXPECT_EQ(m.layer_output_shapes()[1], (Shape{8, 12, 2}));
  const Sequential back = model_from_json(model_to_json(m), "model.json");
  EXPECT_EQ(back.layers()[1].args<UpSamplingArgs>().size, Size2(2, 3));
  EXPECT_EQ(model_to_json(back), model_to_json(m));
  const auto layer = nlohmann::json::parse(model_to_json(m))["config"]["layers"][1];
  EXPECT_EQ(layer["class_name"], "UpSampling2D");
  EXPECT_EQ(layer["config"]["size"], nlohmann::json::parse("[2, 3]"));
  EXPECT_EQ(layer["config"]["data_format"], "channels_last");
  EXPECT_EQ(layer["config"]["interpolation"], "nearest");
  EXPECT_EQ(layer["build_config"]["input_shape"], nlohmann::json::parse("[null, 4, 4, 2]"));
  // Keras's default size when the field is absent (a hand-written config): (2, 2).
  std::string json = keras3_json();
  const std::string size = "\"size\": [2, 3], ";
  json.erase(json.find(size), size.size());
  EXPECT_EQ(model_from_json(json, "up.json").layers()[1].args<UpSamplingArgs>().size, Size2(2));
}

TEST(UpSampling2D, KerasJsonWithAnUnsupportedArgumentIsRefusedNamingIt) {
  auto refusal = [](const std::string& from, const std::string& to) {
    std::string json = keras3_json();
    json.replace(json.find(from), from.size(), to);
    return error_of([&] { model_from_json(json, "up.json"); });
  };
  EXPECT_EQ(refusal("\"interpolation\": \"nearest\"", "\"interpolation\": \"bilinear\""),
            "up.json: layer 'up_sampling2d' field interpolation: interpolation 'bilinear' is not "
            "supported: only 'nearest' (each value repeated over its block)");
  EXPECT_NE(refusal("\"data_format\": \"channels_last\", \"interp",
                    "\"data_format\": \"channels_first\", \"interp")
                .find("up.json: layer 'up_sampling2d' field data_format"),
            std::string::npos);
  EXPECT_NE(refusal("\"size\": [2, 3]", "\"size\": [0, 3]")
                .find("up.json: layer 'up_sampling2d' field size"),
            std::string::npos);
}

// ---- the op list ----

TEST(UpsampleCost, TheOpListHasTheForwardAndBackwardWithTheirBytes) {
  const perf::ModelDesc model = perf::describe(autoencoder());
  for (const perf::DeviceKind device : {perf::DeviceKind::cpu, perf::DeviceKind::gpu}) {
    std::vector<perf::Op> up;
    for (const perf::Op& o : perf::step_ops(model, 32, device, perf::Mode::resident))
      if (o.call.rfind("upsample2d_", 0) == 0) up.push_back(o);
    ASSERT_EQ(up.size(), 2u);
    EXPECT_EQ(up[0].call, "upsample2d_forward");
    EXPECT_EQ(up[1].call, "upsample2d_backward");
    const int64_t x = 32 * 2 * 2 * 3, y = 32 * 4 * 4 * 3;
    for (const perf::Op& o : up) {
      EXPECT_EQ(o.layer, "up_sampling2d");
      EXPECT_EQ(o.elements, y);
    }
    EXPECT_EQ(up[0].bytes_read, 4 * x);
    EXPECT_EQ(up[0].bytes_written, 4 * y);
    EXPECT_EQ(up[1].bytes_read, 4 * y);
    EXPECT_EQ(up[1].bytes_written, 4 * x);
    EXPECT_EQ(up[0].launches, device == perf::DeviceKind::gpu ? 1 : 0);
  }
}

}  // namespace
}  // namespace crossover
