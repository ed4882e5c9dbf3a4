// Conv2D and the pooling layers as a Keras user meets them: shapes, defaults, names, arguments,
// the files and the JSON. (Their gradients and forward arithmetic: gradient_test.cpp; training:
// model_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

#include "core/error.h"
#include "formats/model_config.h"
#include "formats/weights_io.h"
#include "nn/layers.h"
#include "nn/layers/kind.h"
#include "nn/sequential.h"
#include "perf/backend_wrappers.h"
#include "perf/cost_model.h"
#include "perf/recording.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::error_of;

using testing_util::random_tensor;

// Keras's "Simple MNIST convnet".
Sequential keras_convnet() {
  return Sequential({Input({28, 28, 1}), Conv2D(32, 3, "relu"), MaxPooling2D(2),
                     Conv2D(64, 3, "relu"), MaxPooling2D(2), Flatten(), Dropout(0.5),
                     Dense(10, "softmax")});
}

TEST(Conv2D, TheKerasMnistConvnetHasKerasShapesAndParameterCount) {
  const Sequential model = keras_convnet();
  EXPECT_EQ(model.count_params(), 34826);
  const std::string s = model.summary();
  for (const char* shape : {"(None, 26, 26, 32)", "(None, 13, 13, 32)", "(None, 11, 11, 64)",
                            "(None, 5, 5, 64)", "(None, 1600)", "(None, 10)"})
    EXPECT_NE(s.find(shape), std::string::npos) << shape << " not in\n" << s;
  EXPECT_NE(s.find("conv2d (Conv2D)"), std::string::npos) << s;
  EXPECT_NE(s.find("max_pooling2d_1 (MaxPooling2D)"), std::string::npos) << s;
}

TEST(Conv2D, WeightsHaveKerasNamesAndShapes) {
  Sequential model = keras_convnet();
  model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1});
  const auto w = model.get_weights();
  ASSERT_EQ(w.size(), 6u);
  EXPECT_EQ(w[0].name, "conv2d/kernel");
  EXPECT_EQ(w[0].value.shape(), (Shape{3, 3, 1, 32}));
  EXPECT_EQ(w[1].name, "conv2d/bias");
  EXPECT_EQ(w[1].value.shape(), (Shape{32}));
  EXPECT_EQ(w[2].name, "conv2d_1/kernel");
  EXPECT_EQ(w[2].value.shape(), (Shape{3, 3, 32, 64}));
  EXPECT_EQ(w[4].name, "dense/kernel");
  EXPECT_EQ(w[4].value.shape(), (Shape{1600, 10}));
}

TEST(Conv2D, KernelsAreGlorotUniformWithReceptiveFieldFansAndBiasesZero) {
  Sequential model = keras_convnet();
  model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1, .seed = 3});
  const auto w = model.get_weights();
  // conv2d/kernel (3, 3, 1, 32): fan_in 9, fan_out 288. (The Dense fans of the last two
  // dimensions, 1 and 32, would give a limit three times larger.)
  for (const auto& [index, fan_in, fan_out] :
       {std::tuple{0, 9.0, 288.0}, std::tuple{2, 288.0, 576.0}}) {
    const double limit = std::sqrt(6.0 / (fan_in + fan_out));
    double largest = 0;
    for (float v : w[static_cast<std::size_t>(index)].value.values())
      largest = std::max(largest, std::abs(static_cast<double>(v)));
    EXPECT_LE(largest, limit) << w[static_cast<std::size_t>(index)].name;
    EXPECT_GT(largest, 0.95 * limit) << w[static_cast<std::size_t>(index)].name;
  }
  for (float v : w[1].value.values()) EXPECT_EQ(v, 0.0f);
}

TEST(Conv2D, OutputShapesAreKerasValidAndSame) {
  auto out = [](std::vector<Layer> layers) {  // the last layer's, before a Flatten
    layers.push_back(Flatten());
    const Sequential m(std::move(layers));
    return m.layer_output_shapes().end()[-2];
  };
  // 'same': ceil(input / stride); 'valid': floor((input - window) / stride) + 1.
  EXPECT_EQ(out({Input({28, 28, 1}), Conv2D(4, 3, "linear", 2, "same")}), (Shape{14, 14, 4}));
  EXPECT_EQ(out({Input({7, 9, 1}), Conv2D(4, 3, "linear", 2, "same")}), (Shape{4, 5, 4}));
  EXPECT_EQ(out({Input({7, 7, 2}), Conv2D(4, {2, 4}, "linear", 1, "same")}), (Shape{7, 7, 4}));
  EXPECT_EQ(out({Input({7, 8, 2}), Conv2D(4, {3, 2}, "linear", {2, 3})}), (Shape{3, 3, 4}));
  EXPECT_EQ(out({Input({13, 13, 3}), MaxPooling2D(2)}), (Shape{6, 6, 3}));
  EXPECT_EQ(out({Input({13, 13, 3}), MaxPooling2D(2, std::nullopt, "same")}), (Shape{7, 7, 3}));
  EXPECT_EQ(out({Input({13, 13, 3}), AveragePooling2D(3, 2)}), (Shape{6, 6, 3}));
  EXPECT_EQ(out({Input({5, 6, 3}), GlobalAveragePooling2D()}), (Shape{3}));
  EXPECT_EQ(out({Input({5, 6, 3}), GlobalMaxPooling2D()}), (Shape{3}));
  EXPECT_EQ(out({Input({12}), Reshape({2, -1, 3})}), (Shape{2, 2, 3}));
}

TEST(Conv2D, BadArgumentsAreRefusedNamingTheLayerAndArgument) {
  EXPECT_EQ(error_of([] { Conv2D(0, 3); }), "Conv2D: filters must be at least 1, got 0");
  EXPECT_NE(error_of([] { Conv2D(8, {3, 0}); }).find("Conv2D: kernel_size"), std::string::npos);
  EXPECT_NE(error_of([] { Conv2D(8, 3, "relu", 0); }).find("Conv2D: strides"), std::string::npos);
  EXPECT_EQ(error_of([] { Conv2D(8, 3, "relu", 1, "full"); }),
            "Conv2D: padding must be 'valid' or 'same', got 'full'");
  EXPECT_NE(error_of([] { Conv2D(8, 3, "mish"); }).find("activation"), std::string::npos);
  EXPECT_NE(error_of([] { MaxPooling2D(0); }).find("MaxPooling2D: pool_size"), std::string::npos);
  EXPECT_NE(error_of([] { AveragePooling2D(2, Size2(-1)); }).find("AveragePooling2D: strides"),
            std::string::npos);
  EXPECT_NE(error_of([] { Reshape({2, -1, -1}); }).find("Reshape"), std::string::npos);
  // Shapes that cannot work, named by layer when the model is built.
  EXPECT_NE(error_of([] {
              Sequential({Input({2, 2, 1}), Conv2D(4, 3)});
            }).find("conv2d: the 3x3 window does not fit in the 2x2 input"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              Sequential({Input({784}), Conv2D(4, 3)});
            }).find("conv2d: Conv2D needs samples of shape (height, width, channels)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              Sequential({Input({12}), Reshape({5, -1})});
            }).find("reshape:"),
            std::string::npos);
}

TEST(Conv2D, GreyImagesFeedAModelDeclaredWithOneChannel) {
  Sequential model({Input({6, 6, 1}), Conv2D(2, 3, "relu"), Flatten(), Dense(3, "softmax")});
  model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1, .seed = 1});
  const Tensor grey = random_tensor({4, 6, 6}, 5);
  Tensor one_channel({4, 6, 6, 1});
  for (int64_t i = 0; i < grey.size(); ++i) one_channel[i] = grey[i];
  const Tensor a = model.predict(grey), b = model.predict(one_channel);
  ASSERT_EQ(a.shape(), (Shape{4, 3}));
  for (int64_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]);
  const Tensor y({4}, {0, 1, 2, 1});
  EXPECT_NO_THROW(model.fit(grey, y, {.epochs = 1, .verbose = 0}));
  EXPECT_EQ(model.input_shape(), (Shape{6, 6, 1}));
}

TEST(Conv2D, SafetensorsRoundTripKeepsThePredictions) {
  Sequential model(
      {Input({8, 8, 1}), Conv2D(3, 3, "relu"), MaxPooling2D(2), Flatten(), Dense(4, "softmax")});
  model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1, .seed = 2});
  const std::string path = testing_util::temp_folder("conv_weights") + "/w.safetensors";
  save_weights(model, path);
  Sequential other(
      {Input({8, 8, 1}), Conv2D(3, 3, "relu"), MaxPooling2D(2), Flatten(), Dense(4, "softmax")});
  other.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1, .seed = 99});
  load_weights(other, path);
  const Tensor x = random_tensor({5, 8, 8, 1}, 3);
  const Tensor a = model.predict(x), b = other.predict(x);
  for (int64_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]);
}

TEST(Conv2D, KerasJsonRoundTripKeepsTheLayers) {
  const Sequential model = keras_convnet();
  const Sequential back = model_from_json(model_to_json(model), "model.json");
  ASSERT_EQ(back.layers().size(), model.layers().size());
  EXPECT_EQ(back.count_params(), 34826);
  EXPECT_EQ(back.layer_output_shapes(), model.layer_output_shapes());
  for (std::size_t i = 0; i < model.layers().size(); ++i) {
    const Layer &a = model.layers()[i], &b = back.layers()[i];
    EXPECT_EQ(a.type, b.type) << i;
    nlohmann::json ja, jb;  // each kind's arguments, as the commands' record lists them
    layer_kind(a).describe(a, ja);
    layer_kind(b).describe(b, jb);
    EXPECT_EQ(ja, jb) << i;
  }
}

// A Conv2D and a MaxPooling2D as Keras 3's to_json() writes them.
std::string keras3_json() {
  return R"({"module": "keras", "class_name": "Sequential", "config": {"name": "sequential",
    "trainable": true, "dtype": "float32", "layers": [
    {"module": "keras.layers", "class_name": "InputLayer", "config": {"batch_shape": [null, 28, 28, 1],
     "dtype": "float32", "sparse": false, "ragged": false, "name": "input_layer"}, "registered_name": null},
    {"module": "keras.layers", "class_name": "Conv2D", "config": {"name": "conv2d", "trainable": true,
     "dtype": "float32", "filters": 32, "kernel_size": [3, 3], "strides": [1, 1], "padding": "valid",
     "data_format": "channels_last", "dilation_rate": [1, 1], "groups": 1, "activation": "relu",
     "use_bias": true, "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform",
     "config": {"seed": null}, "registered_name": null}, "bias_initializer": {"module": "keras.initializers",
     "class_name": "Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null,
     "bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null,
     "bias_constraint": null}, "registered_name": null, "build_config": {"input_shape": [null, 28, 28, 1]}},
    {"module": "keras.layers", "class_name": "MaxPooling2D", "config": {"name": "max_pooling2d",
     "trainable": true, "dtype": "float32", "pool_size": [2, 2], "padding": "valid", "strides": [2, 2],
     "data_format": "channels_last"}, "registered_name": null},
    {"module": "keras.layers", "class_name": "Flatten", "config": {"name": "flatten", "trainable": true,
     "dtype": "float32", "data_format": "channels_last"}, "registered_name": null},
    {"module": "keras.layers", "class_name": "Dense", "config": {"name": "dense", "trainable": true,
     "dtype": "float32", "units": 10, "activation": "softmax", "use_bias": true}, "registered_name": null}
    ]}, "registered_name": null})";
}

TEST(Conv2D, KerasJsonWithTheDefaultsEveryRealFileCarriesLoads) {
  const Sequential m = model_from_json(keras3_json(), "convnet.json");
  EXPECT_EQ(m.layer_output_shapes()[1], (Shape{26, 26, 32}));
  EXPECT_EQ(m.layer_output_shapes()[2], (Shape{13, 13, 32}));
  EXPECT_EQ(m.count_params(), 32 * 9 + 32 + 13 * 13 * 32 * 10 + 10);
}

std::string with(std::string json, const std::string& from, const std::string& to) {
  json.replace(json.find(from), from.size(), to);
  return json;
}

TEST(Conv2D, KerasJsonWithAnUnsupportedArgumentIsRefusedNamingIt) {
  const std::string dilated = keras3_json();
  // Keras's own rule and words (BaseConv.__init__).
  EXPECT_EQ(error_of([&] {
              model_from_json(
                  with(with(dilated, "\"dilation_rate\": [1, 1]", "\"dilation_rate\": [2, 2]"),
                       "\"strides\": [1, 1]", "\"strides\": [1, 2]"),
                  "convnet.json");
            }),
            "convnet.json: layer 'conv2d' field dilation_rate: `strides > 1` not supported in "
            "conjunction with `dilation_rate > 1`. Received: strides=(1, 2) and "
            "dilation_rate=(2, 2)");
  EXPECT_NE(error_of([&] {
              model_from_json(
                  with(dilated, "\"dilation_rate\": [1, 1]", "\"dilation_rate\": [0, 1]"),
                  "convnet.json");
            }).find("layer 'conv2d' field dilation_rate"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              model_from_json(with(dilated, "\"groups\": 1", "\"groups\": 2"), "convnet.json");
            }).find("layer 'conv2d' field groups"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              model_from_json(with(dilated, "\"data_format\": \"channels_last\", \"dilation",
                                   "\"data_format\": \"channels_first\", \"dilation"),
                              "convnet.json");
            }).find("layer 'conv2d' field data_format"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              model_from_json(
                  with(dilated, "\"kernel_regularizer\": null",
                       "\"kernel_regularizer\": {\"class_name\": \"OrthogonalRegularizer\"}"),
                  "convnet.json");
            }).find("layer 'conv2d' field kernel_regularizer"),
            std::string::npos);
}

// ---- dilation_rate (atrous convolution) ----

TEST(Conv2D, DilationRateSizesTheOutputForTheKernelsDilatedSpanAsKerasDoes) {
  auto out = [](std::vector<Layer> layers) {
    const Sequential m(std::move(layers));
    return m.layer_output_shapes().back();
  };
  // Keras 3.15's shapes: a 3x3 kernel at dilation 2 spans 5x5; a 2x3 at (2, 3) spans 3x7.
  EXPECT_EQ(out({Input({5, 6, 2}), Conv2D(3, 3, "linear", 1, "valid", true, 2)}), (Shape{1, 2, 3}));
  EXPECT_EQ(out({Input({7, 8, 2}), Conv2D(3, {2, 3}, "linear", 1, "valid", true, {2, 3})}),
            (Shape{5, 2, 3}));
  EXPECT_EQ(out({Input({7, 8, 2}), Conv2D(3, {2, 3}, "linear", 1, "same", true, {2, 3})}),
            (Shape{7, 8, 3}));
  // The kernel keeps its own size: 3 x 3 x 2 x 3 + 3 parameters, as Keras counts them.
  EXPECT_EQ(
      Sequential({Input({5, 6, 2}), Conv2D(3, 3, "linear", 1, "valid", true, 2)}).count_params(),
      57);
}

TEST(Conv2D, SamePaddingWithDilationPadsTheDilatedSpanAsTensorFlowDoes) {
  // The step's convolution calls carry the dilation and TensorFlow's padding of the span: 3x3 at
  // (2, 2) spans 5x5, two on each side; 3x2 at (2, 3) spans 5x4, columns 1 left and 2 right.
  Sequential model({Input({6, 6, 2}), Conv2D(3, 3, "relu", 1, "same", true, 2),
                    Conv2D(2, {3, 2}, "linear", 1, "same", true, {2, 3}), Flatten(), Dense(2)});
  perf::RecordingBackend* recorder = nullptr;
  model.compile(Adam(), "mean_squared_error", {},
                {.make_backend =
                     [&recorder] {
                       auto r = std::make_unique<perf::RecordingBackend>("cpu", true);
                       recorder = r.get();
                       return r;
                     },
                 .initialize_weights = false});
  model.trace_training_step(4);
  int seen = 0;
  for (const perf::BackendCall& c : recorder->calls()) {
    if (c.call != perf::Call::conv2d_forward) continue;
    ++seen;
    const ConvShape& s = c.conv;
    EXPECT_EQ(std::tie(s.out_h, s.out_w), std::tie(s.in_h, s.in_w)) << c.scope;
    if (c.scope == "conv2d") {
      EXPECT_EQ(std::tie(s.kernel_h, s.kernel_w, s.dilation_h, s.dilation_w),
                std::make_tuple(3, 3, 2, 2));
      EXPECT_EQ(std::tie(s.pad_top, s.pad_left, s.pad_bottom, s.pad_right),
                std::make_tuple(2, 2, 2, 2));
    } else {
      EXPECT_EQ(std::tie(s.kernel_h, s.kernel_w, s.dilation_h, s.dilation_w),
                std::make_tuple(3, 2, 2, 3));
      EXPECT_EQ(std::tie(s.pad_top, s.pad_left, s.pad_bottom, s.pad_right),
                std::make_tuple(2, 1, 2, 2));
    }
  }
  EXPECT_EQ(seen, 2);
}

TEST(Conv2D, StridesAboveOneWithADilationAboveOneAreRefusedAsKerasRefusesThem) {
  EXPECT_EQ(error_of([] {
              Conv2D(8, 3, "relu", {2, 1}, "valid", true, {1, 2});
            }),
            "Conv2D: `strides > 1` not supported in conjunction with `dilation_rate > 1`. "
            "Received: strides=(2, 1) and dilation_rate=(1, 2)");
  EXPECT_NE(error_of([] {
              Conv2DTranspose(8, 3, "relu", 2, "same", true, 2);
            }).find("Conv2DTranspose: `strides > 1` not supported"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              Conv2D(8, 3, "relu", 1, "valid", true, {1, 0});
            }).find("Conv2D: dilation_rate must be at least 1"),
            std::string::npos);
  EXPECT_NO_THROW(Conv2D(8, 3, "relu", 1, "valid", true, {1, 4}));
  EXPECT_NO_THROW(Conv2D(8, 3, "relu", 3, "valid", true, 1));
  // A dilated span that 'valid' cannot fit, named with the kernel and its span.
  EXPECT_EQ(error_of([] {
              Sequential({Input({4, 9, 1}), Conv2D(4, 3, "linear", 1, "valid", true, 2)});
            }),
            "conv2d: the 3x3 kernel with dilation_rate (2, 2) spans 5x5, which does not fit in "
            "the 4x9 input with padding 'valid': use padding 'same', a smaller kernel or a "
            "smaller dilation");
  EXPECT_EQ(error_of([] {
              Sequential({Input({4, 9, 1}),
                          Conv2D(4, 3, "linear", 1, "same", true, {1, int64_t{1} << 50})});
            }),
            "conv2d: a 3x3 kernel with dilation_rate (1, 1125899906842624) spans an absurdly "
            "large window");
}

TEST(Conv2D, DilationRateRoundTripsThroughKerasJsonAndTheCommandLine) {
  const Sequential m =
      model_from_json(with(keras3_json(), "\"dilation_rate\": [1, 1]", "\"dilation_rate\": [2, 3]"),
                      "convnet.json");
  EXPECT_EQ(m.layer_output_shapes()[1], (Shape{24, 22, 32}));
  EXPECT_EQ(m.layers()[1].args<ConvArgs>().dilation_rate, Size2(2, 3));
  const nlohmann::json written = nlohmann::json::parse(model_to_json(m));
  EXPECT_EQ(written["config"]["layers"][1]["config"]["dilation_rate"],
            nlohmann::json::parse("[2, 3]"));
  const Sequential back = model_from_json(model_to_json(m), "again.json");
  EXPECT_EQ(back.layers()[1].args<ConvArgs>().dilation_rate, Size2(2, 3));
  // An int, as Keras also accepts.
  const Sequential two = model_from_json(
      with(keras3_json(), "\"dilation_rate\": [1, 1]", "\"dilation_rate\": 2"), "two.json");
  EXPECT_EQ(two.layers()[1].args<ConvArgs>().dilation_rate, Size2(2));
  // The command's layer list: conv:FILTERS:KERNEL:ACTIVATION:PADDING:STRIDES:DILATION, and its
  // record.
  const std::optional<Layer> cli =
      layer_kind(LayerType::conv2d)
          .from_cli(CliFields({"conv", "4", "3", "relu", "same", "1", "2x3"},
                              "conv:4:3:relu:same:1:2x3"));
  ASSERT_TRUE(cli.has_value());
  EXPECT_EQ(cli->args<ConvArgs>().dilation_rate, Size2(2, 3));
  nlohmann::json record;
  layer_kind(LayerType::conv2d).describe(*cli, record);
  EXPECT_EQ(record["dilation_rate"], nlohmann::json::parse("[2, 3]"));
}

TEST(Conv2D, ADilatedConvolutionCostsTheFlopsOfItsTapsAndIsNamedSo) {
  const perf::ModelDesc model = perf::describe(Sequential(
      {Input({9, 9, 2}), Conv2D(4, 3, "relu", 1, "valid", true, 2), Flatten(), Dense(3)}));
  const auto ops = perf::step_ops(model, 8, perf::DeviceKind::cpu, perf::Mode::resident);
  int forwards = 0;
  for (const perf::Op& o : ops)
    if (o.call == "conv2d_forward") {
      ++forwards;
      EXPECT_EQ(o.name, "conv2d conv forward 9x9x2->5x5x4 dilation 2x2");
      EXPECT_EQ(o.flops, int64_t{2} * 8 * 5 * 5 * 4 * 3 * 3 * 2);  // 9 taps, not 25
      EXPECT_EQ(o.conv.dilation_h, 2);
    }
  EXPECT_EQ(forwards, 1);
}

TEST(Conv2D, IsRefusedAtCompileOnADeviceWithoutIt) {
  // A backend that answers has_conv2d() false (both of crossover's own have convolutions).
  struct NoConvolutions : perf::ForwardingBackend {
    NoConvolutions() : ForwardingBackend(make_cpu_backend(1)) {}
    bool has_conv2d() const override { return false; }
  };
  Sequential model = keras_convnet();
  const std::string why = error_of([&] {
    model.compile(Adam(), "sparse_categorical_crossentropy", {},
                  {.make_backend = [] { return std::make_unique<NoConvolutions>(); }});
  });
  EXPECT_EQ(why, "conv2d: Conv2D is not available on cpu (its backend has no convolutions)");
}

TEST(Conv2D, CompilesForAGpusRecordedStepAsForTheCudaBackend) {
  // explain and compare record a GPU's step: the convnet compiles there as on CUDA itself.
  Sequential model = keras_convnet();
  EXPECT_NO_THROW(model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.make_backend = [] {
                                  return std::make_unique<perf::RecordingBackend>("cuda:0", false);
                                }}));
}

TEST(Conv2D, TheOpListCountsAConvolutionsFlopsAsItsGemm) {
  const perf::ModelDesc convnet = perf::describe(keras_convnet());
  const auto ops = perf::step_ops(convnet, 128, perf::DeviceKind::cpu, perf::Mode::resident);
  int64_t forward_flops = 0;
  for (const perf::Op& o : ops)
    if (o.call == "conv2d_forward") forward_flops += o.flops;
  // 2 x outputs x the kernel's taps: 26*26*32 x 3*3*1 and 11*11*64 x 3*3*32 per sample.
  EXPECT_EQ(forward_flops, int64_t{2} * 128 * (26 * 26 * 32 * 9 + 11 * 11 * 64 * 288));
}

TEST(Conv2D, TheStepRecordsEachConvolutionAndPoolingCallWithItsShape) {
  Sequential model = keras_convnet();
  perf::RecordingBackend* recorder = nullptr;
  model.compile(Adam(), "sparse_categorical_crossentropy", {},
                {.make_backend =
                     [&recorder] {
                       auto r = std::make_unique<perf::RecordingBackend>("cpu", true);
                       recorder = r.get();
                       return r;
                     },
                 .initialize_weights = false});
  model.trace_training_step(16);
  std::vector<std::string> conv_calls;
  for (const perf::BackendCall& c : recorder->calls()) {
    const std::string name = perf::call_name(c.call);
    if (name.find("conv2d") == 0 || name.find("pool2d") == 0)
      conv_calls.push_back(c.scope + " " + name);
    if (c.call == perf::Call::conv2d_forward && c.scope == "conv2d_1") {
      EXPECT_EQ(c.m, 16);
      EXPECT_EQ(c.conv.in_h, 13);
      EXPECT_EQ(c.conv.in_c, 32);
      EXPECT_EQ(c.conv.out_h, 11);
      EXPECT_EQ(c.conv.out_c, 64);
      EXPECT_EQ(c.act, ActivationKind::relu);  // fused
    }
  }
  // Forward, then backward from the top; the first layer's input gradient is not computed.
  EXPECT_EQ(conv_calls,
            (std::vector<std::string>{
                "conv2d conv2d_forward", "max_pooling2d pool2d_forward", "conv2d_1 conv2d_forward",
                "max_pooling2d_1 pool2d_forward", "max_pooling2d_1 pool2d_backward",
                "conv2d_1 conv2d_backward_input", "conv2d_1 conv2d_backward_weights",
                "max_pooling2d pool2d_backward", "conv2d conv2d_backward_weights"}));
}

}  // namespace
}  // namespace crossover
