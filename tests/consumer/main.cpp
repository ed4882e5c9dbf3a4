// Trains a small Dense model for one epoch on synthetic data through the installed crossover
// package, and prints the loss: the smallest real use of the library from another project.
#include <crossover.h>

#include <cmath>
#include <cstdio>

int main() {
  using namespace crossover;
  const int64_t n = 512, features = 20, classes = 4;
  Tensor x({n, features});
  Tensor y({n});
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = i % classes;
    y[i] = static_cast<float>(label);
    for (int64_t j = 0; j < features; ++j)
      x[i * features + j] =
          static_cast<float>(std::sin(0.37 * static_cast<double>(i * features + j))) +
          (j % classes == label ? 1.0f : 0.0f);
  }
  try {
    Sequential model({Input({features}), Dense(32, "relu"), Dense(classes, "softmax")});
    model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
                  {.threads = 1, .seed = 1});
    const History h = model.fit(x, y, {.epochs = 1, .verbose = 0});
    const double loss = h.epochs.back().loss;
    std::printf("consumer: %lld parameters, 1 epoch, loss %.4f\n",
                static_cast<long long>(model.count_params()), loss);
    return std::isfinite(loss) ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "consumer: error: %s\n", e.what());
    return 2;
  }
}
