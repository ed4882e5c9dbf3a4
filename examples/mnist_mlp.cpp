// The seed experiment's SMALL model, the way a Keras user writes it.
//   build/examples/mnist_mlp [data]   (data: a folder of the four MNIST IDX files, an .npz,
//                                      "mnist-10k" or "auto"; default auto)
#include <cstdio>
#include <exception>

#include "crossover.h"

int main(int argc, char** argv) try {
  using namespace crossover;
  data::DataSplits d = data::load_data(argc > 1 ? argv[1] : "auto",
                                       [](const std::string& line) { std::puts(line.c_str()); });
  Tensor x_train = data::to_float_images(d.train), y_train = data::to_float_labels(d.train);
  Tensor x_test = data::to_float_images(d.test), y_test = data::to_float_labels(d.test);

  Sequential model({Flatten({28, 28}), Dense(128, "relu"), Dropout(0.2), Dense(10, "softmax")});
  model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"});
  std::fputs(model.summary().c_str(), stdout);
  History h = model.fit(x_train, y_train, {.epochs = 10});
  EvaluateResult r = model.evaluate(x_test, y_test);
  std::printf("test accuracy: %.4f after %zu epochs\n", r.accuracy, h.epochs.size());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 2;
}
