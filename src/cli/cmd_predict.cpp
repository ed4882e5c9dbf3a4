// crossover predict: the class a saved model gives one digit image (an 8-bit grey 28x28 PNG, as
// MNIST's: a white digit on black), with the probabilities of every class; or, for a model whose
// output is an image, that output.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "cli/cli.h"
#include "core/error.h"
#include "data/png.h"
#include "formats/weights_io.h"

namespace crossover::cli {

namespace {

struct PredictOptions : CommonOptions {
  std::string load;
  std::string image;
  std::string device = "cpu";
};

// A model whose output is an image (an autoencoder's): its shape and value range, and in the JSON
// record its values in row-major order.
void print_image_output(const PredictOptions& o, const Sequential& model, const Tensor& p) {
  const Shape shape(p.shape().begin() + 1, p.shape().end());
  const auto [low, high] = std::minmax_element(p.data(), p.data() + p.size());
  std::printf("%s: an output of shape %s, values in [%.4f, %.4f]\n", o.image.c_str(),
              shape_to_string(shape).c_str(), static_cast<double>(*low),
              static_cast<double>(*high));
  if (o.json.empty()) return;
  write_json_file("--json", o.json,
                  {{"command", "predict"},
                   {"load", o.load},
                   {"image", o.image},
                   {"device", model.device_name()},
                   {"output_shape", shape},
                   {"output", std::vector<float>(p.data(), p.data() + p.size())}});
}

void run_predict(const PredictOptions& o) {
  if (!o.json.empty()) check_writable("--json", o.json);
  Sequential model = load_model(o.load, {.device = o.device, .threads = 1});
  Tensor x = data::read_png_gray28(o.image);  // (1, 28, 28)
  const Shape want = model.input_shape();
  if (shape_size(want) != 28 * 28)
    throw Error("--load " + o.load,
                "the model takes samples of shape " + shape_to_string(want) + ", not 28x28 images");
  Shape s{1};
  s.insert(s.end(), want.begin(), want.end());
  x = x.reshaped(s);
  const Tensor p = model.predict(x);
  if (p.rank() > 2) {
    print_image_output(o, model, p);
    return;
  }
  const int64_t classes = p.dim(1);
  const int64_t best = std::max_element(p.data(), p.data() + classes) - p.data();
  std::printf("%s: class %lld (probability %.4f)\n", o.image.c_str(), static_cast<long long>(best),
              static_cast<double>(p[best]));
  if (!o.quiet)
    for (int64_t c = 0; c < classes; ++c)
      std::printf("  %2lld  %.4f%s\n", static_cast<long long>(c), static_cast<double>(p[c]),
                  c == best ? "  <" : "");
  if (o.json.empty()) return;
  nlohmann::json probs = nlohmann::json::array();
  for (int64_t c = 0; c < classes; ++c) probs.push_back(p[c]);
  write_json_file("--json", o.json,
                  {{"command", "predict"},
                   {"load", o.load},
                   {"image", o.image},
                   {"device", model.device_name()},
                   {"class", best},
                   {"probabilities", probs}});
}

}  // namespace

void add_predict(CLI::App& app) {
  auto o = std::make_shared<PredictOptions>();
  auto* cmd = app.add_subcommand("predict", "Classify one digit image with a saved model");
  cmd->add_option("--load", o->load, "The model file (.safetensors) written by train --save")
      ->required();
  cmd->add_option("--image", o->image, "An 8-bit grey 28x28 PNG (white digit on black, as MNIST)")
      ->required();
  add_common_options(*cmd, *o, kJsonOption | kQuietOption,
                     "Write the class and probabilities as JSON to this file",
                     "Only the line with the predicted class");
  cmd->add_option("--device", o->device, "cpu, cuda or cuda:N")->capture_default_str();
  cmd->callback([o] {
    refuse_ranks("predict");
    run_predict(*o);
  });
}

}  // namespace crossover::cli
