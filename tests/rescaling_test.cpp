// Rescaling as a Keras user meets it: its values (x * scale + offset, in fit and predict alike),
// no weights, the Keras JSON (in, out, refused), the CLI's layer list and the op list. (Its
// gradient in a model: gradient_test.cpp; against Keras itself:
// tests/python/test_rescaling_peers.py.)
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/model_config.h"
#include "nn/layers.h"
#include "nn/layers/kind.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "perf/cost_model.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::error_of;
using testing_util::random_tensor;

TEST(Rescaling, PredictIsXTimesScalePlusOffsetInFloat32AndItHasNoWeights) {
  for (const double offset : {0.0, -1.0}) {
    SCOPED_TRACE(offset);
    Sequential model({Input({3, 2}), Rescaling(1.0 / 127.5, offset), Flatten()});
    model.compile(Adam(), "mean_squared_error", {}, {.threads = 1});
    EXPECT_EQ(model.count_params(), 0);
    EXPECT_EQ(model.layers()[1].name, "rescaling");
    EXPECT_EQ(model.layer_output_shapes()[1], (Shape{3, 2}));
    const Tensor x = random_tensor({4, 3, 2}, 5, 0.0f, 255.0f);
    const Tensor y = model.predict(x);
    const float scale = static_cast<float>(1.0 / 127.5), add = static_cast<float>(offset);
    for (int64_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i] * scale + add);
  }
}

TEST(Rescaling, BadArgumentsAreRefused) {
  EXPECT_EQ(error_of([] { Rescaling(std::numeric_limits<double>::infinity()); }),
            "Rescaling: scale and offset must be finite numbers, got inf and 0");
}

// Keras 3.15's config of Rescaling(1 / 255, offset=-0.5), as it writes it.
std::string keras3_json(
    const std::string& args = R"("scale": 0.00392156862745098, "offset": -0.5)") {
  return R"({"module": "keras", "class_name": "Sequential", "config": {"name": "sequential",
    "layers": [
      {"module": "keras.layers", "class_name": "InputLayer",
       "config": {"batch_shape": [null, 6], "dtype": "float32", "name": "input_layer"}},
      {"module": "keras.layers", "class_name": "Rescaling",
       "config": {"name": "rescaling", "trainable": true,
                  "dtype": {"module": "keras", "class_name": "DTypePolicy",
                            "config": {"name": "float32"}, "registered_name": null}, )" +
         args + R"(}, "registered_name": null},
      {"module": "keras.layers", "class_name": "Dense", "config": {"name": "dense", "units": 2}}]}})";
}

TEST(Rescaling, KerasJsonAsKerasWritesItLoadsAndRoundTripsToTheDigit) {
  const Sequential m = model_from_json(keras3_json(), "r.json");
  const RescalingArgs& a = m.layers()[1].args<RescalingArgs>();
  EXPECT_EQ(a.scale, 0.00392156862745098);
  EXPECT_EQ(a.offset, -0.5);
  const auto layer = nlohmann::json::parse(model_to_json(m))["config"]["layers"][1];
  EXPECT_EQ(layer["class_name"], "Rescaling");
  EXPECT_EQ(layer["config"]["scale"].get<double>(), 0.00392156862745098);
  EXPECT_EQ(layer["config"]["offset"].get<double>(), -0.5);
  EXPECT_EQ(model_to_json(model_from_json(model_to_json(m), "again")), model_to_json(m));
  // Keras's default offset when absent.
  EXPECT_EQ(model_from_json(keras3_json(R"("scale": 2)"), "r.json")
                .layers()[1]
                .args<RescalingArgs>()
                .offset,
            0.0);
}

TEST(Rescaling, KerasJsonItCannotRunIsRefusedNamingTheField) {
  EXPECT_NE(error_of([] {
              model_from_json(keras3_json(R"("offset": 1)"), "r.json");
            }).find("r.json: layer 'rescaling' field scale: Rescaling needs a scale"),
            std::string::npos);
  // A per-channel scale (Keras serializes a list or an array): not a number.
  EXPECT_NE(error_of([] {
              model_from_json(keras3_json(R"("scale": [1, 2])"), "r.json");
            }).find("r.json: layer 'rescaling' field scale"),
            std::string::npos);
}

TEST(Rescaling, TheCliLayerListReadsScaleAndOffset) {
  const Layer l = layer_from_config("Rescaling", R"({"scale": 0.5})");
  EXPECT_EQ(l.args<RescalingArgs>().scale, 0.5);
  const LayerKind* kind = find_cli_layer_kind("rescale");
  ASSERT_NE(kind, nullptr);
  const std::optional<Layer> made = kind->from_cli(CliFields({"rescale", "0.25", "-1"}, "bad"));
  ASSERT_TRUE(made.has_value());
  EXPECT_EQ(made->args<RescalingArgs>().scale, 0.25);
  EXPECT_EQ(made->args<RescalingArgs>().offset, -1.0);
  EXPECT_FALSE(kind->from_cli(CliFields({"rescale"}, "bad")).has_value());
}

TEST(RescalingCost, TheOpListHasItsMultiplyAddAndGradient) {
  const perf::ModelDesc model =
      perf::describe(Sequential({Input({8}), Dense(4), Rescaling(0.5, 1.0), Dense(2)}));
  std::vector<std::string> calls;
  for (const perf::Op& o : perf::step_ops(model, 32, perf::DeviceKind::cpu, perf::Mode::resident))
    if (o.layer == "rescaling") calls.push_back(o.call);
  EXPECT_EQ(calls,
            (std::vector<std::string>{"binary_forward", "binary_forward", "binary_backward"}));
}

}  // namespace
}  // namespace crossover
