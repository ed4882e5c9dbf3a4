// Models whose output is an image, as an autoencoder's: samples of shape (H, W, C), trained with
// the losses Keras computes element by element and averages (mean_squared_error,
// binary_crossentropy), which is the flat computation on (N, H*W*C). predict gives the output's
// shape; targets of the output's shape (or with a last axis of 1 dropped or added, as Keras
// squeezes or expands it) are taken; the losses and metrics that read the last axis as classes
// are refused. (Against Keras itself: tests/python/test_image_output_peers.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "nn/layers.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::error_of;
using testing_util::random_tensor;

// Input(4, 4, 2) -> Conv2D -> MaxPooling2D -> UpSampling2D -> Conv2D(1, sigmoid): an image out,
// or the same model with a Flatten at the end (no parameters: the same initial weights).
// Without Input, the model knows its shapes at its first fit or predict.
Sequential autoencoder(bool flatten, bool with_input = true) {
  std::vector<Layer> layers = {Conv2D(3, 3, "relu", 1, "same"), MaxPooling2D(2), UpSampling2D(2),
                               Conv2D(1, 3, "sigmoid", 1, "same")};
  if (with_input) layers.insert(layers.begin(), Input({4, 4, 2}));
  if (flatten) layers.push_back(Flatten());
  return Sequential(std::move(layers));
}

const Tensor& images() {
  static const Tensor x = random_tensor({10, 4, 4, 2}, 3, 0.0f, 1.0f);
  return x;
}
const Tensor& image_targets() {
  static const Tensor y = random_tensor({10, 4, 4, 1}, 4, 0.0f, 1.0f);
  return y;
}

TEST(ImageOutput, PredictGivesTheOutputsShape) {
  Sequential model = autoencoder(false);
  model.compile(Adam(), "mean_squared_error", {}, {.threads = 1});
  const Tensor p = model.predict(images(), 4);
  EXPECT_EQ(p.shape(), (Shape{10, 4, 4, 1}));
  Sequential flat = autoencoder(true);
  flat.compile(Adam(), "mean_squared_error", {}, {.threads = 1});
  const Tensor q = flat.predict(images(), 4);
  ASSERT_EQ(q.shape(), (Shape{10, 16}));
  for (int64_t i = 0; i < p.size(); ++i) EXPECT_EQ(p[i], q[i]) << i;
}

// The same training, step for step, as the flat model's on (N, 16): Keras's mean over every
// element is the mean over the samples of each sample's mean.
TEST(ImageOutput, TrainsAsTheFlatModelForTheElementWiseLosses) {
  for (const char* loss : {"mean_squared_error", "binary_crossentropy"}) {
    Sequential model = autoencoder(false);
    Sequential flat = autoencoder(true);
    model.compile(Adam(), loss, {"mae", "mse"}, {.threads = 1});
    flat.compile(Adam(), loss, {"mae", "mse"}, {.threads = 1});
    const Tensor y_flat = image_targets().reshaped({10, 16});
    const FitOptions o{.epochs = 2, .batch_size = 4, .shuffle = false, .verbose = 0};
    FitOptions with_validation = o;
    with_validation.validation_x = &images();
    with_validation.validation_y = &image_targets();
    FitOptions flat_validation = o;
    flat_validation.validation_x = &images();
    flat_validation.validation_y = &y_flat;
    const History h = model.fit(images(), image_targets(), with_validation);
    const History g = flat.fit(images(), y_flat, flat_validation);
    for (const char* key : {"loss", "mae", "mse", "val_loss", "val_mae"}) {
      ASSERT_EQ(h.history.at(key).size(), 2u) << loss << " " << key;
      for (std::size_t e = 0; e < 2; ++e)
        EXPECT_EQ(h.history.at(key)[e], g.history.at(key)[e]) << loss << " " << key;
    }
    const EvaluateResult r = model.evaluate(images(), image_targets(), {.verbose = 0});
    const EvaluateResult s = flat.evaluate(images(), y_flat, {.verbose = 0});
    EXPECT_EQ(r.loss, s.loss) << loss;
    EXPECT_GT(r.loss, 0.0) << loss;
  }
}

TEST(ImageOutput, TakesTargetsOfTheShapesKerasSqueezesOrExpands) {
  Sequential model = autoencoder(false);
  model.compile(Adam(), "mean_squared_error", {}, {.threads = 1});
  const EvaluateResult r = model.evaluate(images(), image_targets(), {.verbose = 0});
  for (const Shape& s : {Shape{10, 4, 4}, Shape{10, 4, 4, 1, 1}}) {
    const EvaluateResult t = model.evaluate(images(), image_targets().reshaped(s), {.verbose = 0});
    EXPECT_EQ(t.loss, r.loss) << shape_to_string(s);
  }
  EXPECT_EQ(error_of([&] {
              model.evaluate(images(), image_targets().reshaped({10, 16}));
            }),
            "evaluate: y must have shape (10, 4, 4, 1) for mean_squared_error (the model's "
            "output), got (10, 16)");
  EXPECT_EQ(error_of([&] {
              model.fit(images(), image_targets().reshaped({10, 2, 8, 1}));
            }),
            "fit: y must have shape (10, 4, 4, 1) for mean_squared_error (the model's output), got "
            "(10, 2, 8, 1)");
}

TEST(ImageOutput, RefusesTheLossesAndMetricsThatReadTheLastAxisAsClasses) {
  const std::string tail =
      " on an output of shape (4, 4, 1) reads the last axis as classes at each position, which "
      "crossover does not compute (yet): Flatten the output to (C,), or use mean_squared_error or "
      "binary_crossentropy";
  // Compiled before the model knows its shapes: the first fit says it.
  Sequential model = autoencoder(false, false);
  model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1});
  EXPECT_EQ(error_of([&] { model.fit(images(), image_targets(), {.verbose = 0}); }),
            "sequential: the loss sparse_categorical_crossentropy" + tail);
  // Built already: compile says it, and the model keeps its loss.
  Sequential built = autoencoder(false);
  built.compile(Adam(), "mean_squared_error", {}, {.threads = 1});
  built.predict(images());
  EXPECT_EQ(error_of([&] { built.compile(Adam(), "categorical_crossentropy", {}); }),
            "sequential: the loss categorical_crossentropy" + tail);
  EXPECT_EQ(built.loss_name(), "mean_squared_error");
  EXPECT_EQ(
      error_of([&] { built.compile(Adam(), "mean_squared_error", {"categorical_accuracy"}); }),
      "sequential: the metric categorical_accuracy" + tail);
  EXPECT_EQ(error_of([&] { built.compile(Adam(), "mean_squared_error", {"accuracy"}); }),
            "sequential: the metric accuracy with the loss mean_squared_error" + tail);
  EXPECT_EQ(error_of([&] {
              built.compile(Adam(), "binary_crossentropy", {"accuracy", "binary_accuracy", "mae"});
            }),
            "");
}

}  // namespace
}  // namespace crossover
