// Functional models (LayerGraph, GraphBuilder): what a graph may be, that a chain made as a graph
// trains exactly as the same Sequential, and that a graph with a skip connection trains.
// Their gradients are checked against finite differences in gradient_test.cpp.
#include <gtest/gtest.h>

#include "nn/layers.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::error_of;
using testing_util::random_tensor;

Tensor labels(int64_t n, int64_t classes) {
  Tensor y({n});
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>((i * 7) % classes);
  return y;
}

std::vector<NamedTensor> trained(Sequential& model, int threads) {
  model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
                {.threads = threads, .seed = 11});
  const Tensor x = random_tensor({96, 12}, 3);
  model.fit(x, labels(96, 4), {.epochs = 2, .batch_size = 16, .verbose = 0});
  return model.get_weights();
}

TEST(Functional, AChainMadeAsAGraphTrainsBitIdenticallyToTheSequential) {
  for (int threads : {1, 2}) {
    Sequential seq(
        {Input({12}), Dense(16, "relu"), Dropout(0.25), Dense(8, "tanh"), Dense(4, "softmax")});
    GraphBuilder g;
    int h = g.input({12});
    h = g.add(Dense(16, "relu"), h);
    h = g.add(Dropout(0.25), h);
    h = g.add(Dense(8, "tanh"), h);
    Sequential fun(g.graph(g.add(Dense(4, "softmax"), h)));
    EXPECT_TRUE(fun.functional());
    EXPECT_FALSE(seq.functional());
    const auto a = trained(seq, threads), b = trained(fun, threads);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].name, b[i].name);
      ASSERT_EQ(a[i].value.size(), b[i].value.size());
      for (int64_t e = 0; e < a[i].value.size(); ++e)
        ASSERT_EQ(a[i].value[e], b[i].value[e]) << a[i].name << "[" << e << "] threads " << threads;
    }
  }
}

TEST(Functional, ASkipConnectionModelLearns) {
  GraphBuilder g;
  const int x = g.input({12});
  const int d1 = g.add(Dense(32, "relu"), x);
  const int d2 = g.add(Dense(32, "relu"), d1);
  const int s = g.add(Add(), {d2, d1});
  Sequential model(g.graph(g.add(Dense(4, "softmax"), s)));
  EXPECT_EQ(model.layers().size(), 5u);
  EXPECT_EQ(model.layers()[3].name, "add");
  EXPECT_EQ(model.count_params(), 12 * 32 + 32 + 32 * 32 + 32 + 32 * 4 + 4);
  model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, {.threads = 1, .seed = 3});
  const Tensor xs = random_tensor({128, 12}, 5);
  Tensor y({128});
  for (int64_t i = 0; i < 128; ++i)
    y[i] = xs[i * 12] > 0 ? (xs[i * 12 + 1] > 0 ? 3.0f : 2.0f) : 1.0f;
  const EvaluateResult before = model.evaluate(xs, y, {.verbose = 0});
  model.fit(xs, y, {.epochs = 30, .batch_size = 16, .verbose = 0});
  const EvaluateResult after = model.evaluate(xs, y, {.verbose = 0});
  EXPECT_LT(after.loss, 0.5 * before.loss);
  EXPECT_GT(after.accuracy, 0.9);
  // predict agrees with evaluate's view of the model: probabilities per row.
  const Tensor p = model.predict(xs);
  ASSERT_EQ(p.shape(), (Shape{128, 4}));
  for (int64_t r = 0; r < 4; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < 4; ++c) sum += p[r * 4 + c];
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}

TEST(Functional, ConcatenateGivesTheSumOfTheWidths) {
  GraphBuilder g;
  const int x = g.input({6});
  const int j = g.add(Concatenate(), {g.add(Dense(5), x), g.add(Dense(3), x), x});
  Sequential model(g.graph(j));
  EXPECT_EQ(model.layer_output_shapes().back(), (Shape{14}));
  model.compile(SGD(), "mean_squared_error", {}, {.threads = 1});
  const Tensor in = random_tensor({2, 6}, 1);
  const Tensor out = model.predict(in);
  // Its last six columns are the input itself.
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 6; ++c) EXPECT_EQ(out[r * 14 + 8 + c], in[r * 6 + c]);
}

TEST(Functional, GraphBuilderLeavesOutWhatTheOutputDoesNotReadAndKeepsOrder) {
  GraphBuilder g;
  const int x = g.input({4});
  const int unused = g.add(Dense(2), x);
  const int a = g.add(Dense(3), x);
  (void)unused;
  const LayerGraph graph = g.graph(g.add(Dense(2), a));
  ASSERT_EQ(graph.layers.size(), 3u);
  EXPECT_EQ(graph.inputs[1], std::vector<int>{0});
  EXPECT_EQ(graph.inputs[2], std::vector<int>{1});
}

TEST(Functional, GraphsThatAreNotModelsAreRefusedNamingTheLayer) {
  auto layers = [] { return std::vector<Layer>{Input({4}), Dense(3), Dense(3), Add()}; };
  // A merging layer with one input.
  EXPECT_NE(error_of([&] {
              Sequential(LayerGraph{layers(), {{}, {0}, {1}, {2}}});
            }).find("Add needs two or more inputs"),
            std::string::npos);
  // A layer read by none that is not the output.
  EXPECT_NE(error_of([&] {
              Sequential(LayerGraph{layers(), {{}, {0}, {0}, {2, 2}}});
            }).find("no layer reads its output"),
            std::string::npos);
  // A layer reading one after it.
  EXPECT_NE(error_of([&] {
              Sequential(LayerGraph{layers(), {{}, {2}, {0}, {1, 2}}});
            }).find("not one of the layers before it"),
            std::string::npos);
  // Two inputs to a Dense.
  EXPECT_NE(error_of([&] {
              Sequential(LayerGraph{layers(), {{}, {0, 0}, {1}, {1, 2}}});
            }).find("Dense takes one input, got 2"),
            std::string::npos);
  // No InputLayer first.
  EXPECT_NE(error_of([&] {
              Sequential(LayerGraph{{Dense(3), Dense(3)}, {{}, {0}}});
            }).find("first layer is its InputLayer"),
            std::string::npos);
  // Two layers of one name.
  std::vector<Layer> named = layers();
  named[1].name = named[2].name = "twin";
  EXPECT_NE(error_of([&] {
              Sequential(LayerGraph{named, {{}, {0}, {1}, {1, 2}}});
            }).find("two layers of the model have this name"),
            std::string::npos);
  // Shapes that do not add up.
  GraphBuilder g;
  const int x = g.input({4});
  const int bad = g.add(Add(), {g.add(Dense(3), x), g.add(Dense(2), x)});
  EXPECT_NE(error_of([&] { Sequential(g.graph(bad)); }).find("Add needs inputs of one shape"),
            std::string::npos);
}

// keras.Model([a, b], Dense(Concatenate([a, b]))) on the packed rows (a's values, then b's) is the
// one-input Dense on those rows: the same weights after training, to the bit.
TEST(Functional, TwoInputsConcatenatedTrainAsOneInputOfTheirPackedRows) {
  Sequential one({Input({12}), Dense(8, "relu"), Dense(4, "softmax")});
  GraphBuilder g;
  const int a = g.input({5}, "a");
  const int b = g.input({7}, "b");
  const int j = g.add(Concatenate(), {a, b});
  Sequential two(g.graph(g.add(Dense(4, "softmax"), g.add(Dense(8, "relu"), j))));
  EXPECT_EQ(two.input_layers(), (std::vector<int>{0, 1}));
  EXPECT_EQ(two.input_shape(), (Shape{12}));
  const CompileOptions options{.threads = 2, .seed = 11};
  one.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, options);
  two.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, options);
  two.set_weights(one.get_weights());
  const Tensor xs = random_tensor({96, 12}, 3);
  for (Sequential* m : {&one, &two})
    m->fit(xs, labels(96, 4), {.epochs = 2, .batch_size = 16, .verbose = 0});
  const auto w1 = one.get_weights(), w2 = two.get_weights();
  ASSERT_EQ(w1.size(), w2.size());
  for (std::size_t i = 0; i < w1.size(); ++i)
    for (int64_t e = 0; e < w1[i].value.size(); ++e)
      ASSERT_EQ(w1[i].value[e], w2[i].value[e]) << w1[i].name << "[" << e << "]";
  const Tensor x = random_tensor({10, 12}, 9);
  const Tensor p1 = one.predict(x), p2 = two.predict(x);
  for (int64_t e = 0; e < p1.size(); ++e) ASSERT_EQ(p1[e], p2[e]);
}

// Each input reads its own columns of the packed row, in the model's input order (not the
// layers'): Model([b, a]) with b's 2 values first.
TEST(Functional, EachInputReadsItsColumnsInTheModelsOrder) {
  GraphBuilder g;
  const int a = g.input({3}, "a");
  const int b = g.input({2}, "b");
  const int j = g.add(Concatenate(), {a, b});
  Sequential model(g.graph(j, {b, a}));
  EXPECT_EQ(model.input_layers(), (std::vector<int>{1, 0}));
  model.compile(SGD(), "mean_squared_error", {}, {.threads = 1});
  const Tensor x = random_tensor({4, 5}, 2);
  const Tensor out = model.predict(x);
  ASSERT_EQ(out.shape(), (Shape{4, 5}));
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(out[r * 5 + c], x[r * 5 + 2 + c]);  // a
    for (int64_t c = 0; c < 2; ++c) EXPECT_EQ(out[r * 5 + 3 + c], x[r * 5 + c]);  // b
  }
  // Rows that are not the packed width are refused naming the shape.
  EXPECT_NE(error_of([&] {
              model.predict(random_tensor({4, 6}, 1));
            })
                .find("the model's 2 inputs take packed rows of shape (5,) (their values side by "
                      "side), got (6,)"),
            std::string::npos)
      << error_of([&] {
           model.predict(random_tensor({4, 6}, 1));
         });
}

TEST(Functional, TheModelsInputsMustBeItsInputLayersEachOnce) {
  const auto graph = [] { return LayerGraph{{Input({2}), Input({2}), Add()}, {{}, {}, {0, 1}}}; };
  EXPECT_EQ(Sequential(graph()).input_layers(), (std::vector<int>{0, 1}));
  LayerGraph twice = graph();
  twice.input_layers = {0, 0};
  EXPECT_NE(error_of([&] { Sequential{twice}; }).find("must list each of its InputLayers"),
            std::string::npos);
  LayerGraph not_input = graph();
  not_input.input_layers = {0, 2};
  EXPECT_NE(error_of([&] { Sequential{not_input}; }).find("must list each of its InputLayers"),
            std::string::npos);
  // An input that no layer reads.
  GraphBuilder g;
  const int a = g.input({2});
  const int out = g.add(Dense(1), a);
  g.input({3});
  EXPECT_NE(error_of([&] { Sequential{g.graph(out)}; }).find("does not depend on input 2"),
            std::string::npos);
  // An InputLayer reading a layer.
  EXPECT_NE(error_of([&] {
              Sequential(LayerGraph{{Input({2}), Input({2}), Add()}, {{}, {0}, {0, 1}}});
            }).find("an InputLayer reads no layer"),
            std::string::npos);
}

}  // namespace
}  // namespace crossover

namespace crossover {
namespace {

// x -> d -> d again -> Dense softmax: one Dense called twice on 8 values.
LayerGraph twice_graph() {
  GraphBuilder g;
  const int x = g.input({8});
  const int a = g.add(Dense(8, "tanh"), x);
  return g.graph(g.add(Dense(4, "softmax"), g.again(a, a)));
}

TEST(Functional, ALayerCalledTwiceHasOneSetOfWeights) {
  Sequential model(twice_graph());
  ASSERT_EQ(model.layers().size(), 4u);
  EXPECT_EQ(model.layer_shared_with(), (std::vector<int>{-1, -1, 1, -1}));
  EXPECT_EQ(model.layers()[2].name, model.layers()[1].name);
  EXPECT_EQ(model.count_params(), 8 * 8 + 8 + 8 * 4 + 4);
  model.compile(SGD(), "sparse_categorical_crossentropy", {}, {.threads = 1});
  model.predict(random_tensor({2, 8}, 1));
  // Compiled again: a new backend, the calls' gradient block made anew on it.
  model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 2});
  model.predict(random_tensor({2, 8}, 1));
  std::vector<std::string> names;
  for (const NamedTensor& t : model.get_weights()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"dense/kernel", "dense/bias", "dense_1/kernel",
                                             "dense_1/bias"}));
  // Keras's layer.trainable: one flag for every call of the layer.
  model.set_trainable(2, false);
  EXPECT_FALSE(model.layers()[1].trainable);
  EXPECT_EQ(model.trainable_params(), 8 * 4 + 4);
}

// fit's step on a shared layer (its gradient summed over the calls, the update after them) is
// the custom loop's gradients() then apply_gradients(), for an optimizer with state.
TEST(Functional, FitOnASharedLayerIsItsSummedGradientsUpdate) {
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    const Tensor x = random_tensor({16, 8}, 5);
    const Tensor y = labels(16, 4);
    Sequential fitted(twice_graph()), stepped(twice_graph());
    for (Sequential* m : {&fitted, &stepped})
      m->compile(Adam({.learning_rate = 0.01}), "sparse_categorical_crossentropy", {},
                 {.threads = threads, .seed = 3});
    fitted.fit(x, y, {.epochs = 1, .batch_size = 16, .shuffle = false, .verbose = 0});
    stepped.apply_gradients(stepped.gradients(x, y));
    const auto a = fitted.get_weights(), b = stepped.get_weights();
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i)
      for (int64_t e = 0; e < a[i].value.size(); ++e)
        ASSERT_NEAR(a[i].value[e], b[i].value[e], 1e-6) << a[i].name << "[" << e << "]";
  }
}

TEST(Functional, ALayerCalledAgainOnAnotherWidthIsRefusedNamingItsWeight) {
  GraphBuilder g;
  const int x = g.input({8});
  const int a = g.add(Dense(4, "tanh"), x);
  const LayerGraph graph = g.graph(g.again(a, a));
  const std::string e = error_of([&] { Sequential model(graph); });
  EXPECT_NE(e.find("dense: is called again on an input of shape (4,), but its weights were made "
                   "for its first call: dense/kernel is (8, 4), this input needs (4, 4)"),
            std::string::npos)
      << e;
  // A graph that calls a layer after itself, or an input, is not one.
  LayerGraph bad = twice_graph();
  bad.shared_with = {-1, -1, 3, -1};
  EXPECT_NE(error_of([&] { Sequential m(bad); })
                .find("calls again layer 3, which is not one of "
                      "the layers before it"),
            std::string::npos);
  bad.shared_with = {-1, -1, 0, -1};
  EXPECT_NE(error_of([&] { Sequential m(bad); }).find("an InputLayer is the model's input"),
            std::string::npos);
}

TEST(Functional, GraphBuilderMakesTheFirstCallItKeepsTheLayersFirst) {
  // The first call of the layer is left out (the output does not read it): the second becomes
  // the layer's first in the model.
  GraphBuilder g;
  const int x = g.input({6});
  const int unused = g.add(Dense(6, "relu"), x);
  const int kept = g.again(unused, g.add(Dense(6, "relu"), x));
  const LayerGraph graph = g.graph(g.again(unused, kept));
  EXPECT_EQ(graph.shared_with, (std::vector<int>{-1, -1, -1, 2}));
  Sequential model(graph);
  EXPECT_EQ(model.count_params(), 2 * (36 + 6));
}

}  // namespace
}  // namespace crossover
