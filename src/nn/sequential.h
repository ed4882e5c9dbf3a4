// Sequential: Keras's model of a stack of layers, with compile, fit, evaluate and predict.
//
//   Sequential model({Flatten({28, 28}), Dense(128, "relu"), Dropout(0.2), Dense(10, "softmax")});
//   model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"});
//   History h = model.fit(x_train, y_train, {.epochs = 10});
//   model.evaluate(x_test, y_test);
//
// Errors are crossover::Error with a one-line message naming the argument or layer.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "core/tensor.h"
#include "nn/callbacks.h"
#include "nn/collective.h"
#include "nn/layers.h"
#include "nn/metrics.h"
#include "nn/optimizers.h"
#include "nn/progress.h"

namespace crossover {

// Keras's fit/evaluate/predict default, and every crossover command's.
inline constexpr int64_t kDefaultBatchSize = 32;

struct CompileOptions {
  std::string device = "cpu";  // "cpu", "cuda", "cuda:N"
  int threads = 0;     // CPU threads; 0 = all cores; at most max_cpu_threads() (4 x the cores)
  uint64_t seed = 0;   // initial weights (and, unless fit says otherwise, shuffle and dropout)
  bool graphs = true;  // CUDA: capture steps as graphs (false: one launch per op, "naive")
  // CUDA: fit runs each training step as one fused kernel (backends/fused_mlp.h) where the model
  // is a chain of Dense layers it takes (else fit says in one line why not and steps as usual).
  bool fused_step = false;
  // The dense GEMMs' arithmetic: "fp32" (TF32 off on CUDA), "tf32" (CUDA only), or "bf16"
  // (bf16 operands, fp32 accumulation, master weights and optimizer state): faster and less
  // exact; on the CPU only where it has AVX512_BF16 or AMX-BF16 (refused elsewhere). Empty (the
  // default): the layers' dtype policies decide (mixed_bfloat16: bf16, float32: fp32), as Keras
  // trains a model it loads; given, it must agree with them (tf32 with float32), else compile
  // refuses it naming both (model_precision in nn/layers.h).
  std::string precision;
  // Optional: creates the backend in place of `device`'s (then `threads` and `precision` are not
  // used): a tool's own backend, such as perf/'s, which records a step's calls without a device.
  std::function<std::unique_ptr<Backend>()> make_backend;
  // Optional: wraps the device's backend (perf/ uses it to time every kernel call by phase).
  std::function<std::unique_ptr<Backend>(std::unique_ptr<Backend>)> wrap_backend;
  // false: the parameters start as zeros instead of Keras's initial weights, with no host work
  // per parameter (for tools that only look at the calls a step makes, at any width).
  bool initialize_weights = true;
  // Data parallelism: this process is one rank of collective->size() (src/ranks makes one over
  // MPI). fit then trains as one process would at the same global batch size (each rank its rows
  // of every batch, gradients summed before each step), evaluate splits the rows, and both report
  // the global loss and accuracy on every rank (docs/DISTRIBUTED.md). On a GPU the collective
  // must sum device memory (on_device(): NCCL, src/ranks/nccl.h); compile refuses one that cannot.
  // Null or size 1: one process. A process started by a launcher as one of N ranks (mpirun;
  // core/launcher.h) is refused at compile without a collective (perf's cost model compiles
  // onto a recorder with one of the count it prices, whatever the launcher's).
  std::shared_ptr<Collective> collective;
};

// How fit reports progress: Keras's verbose=1 (a bar, redrawn), 2 (a line per epoch), 0 (none).
struct FitOptions {
  int epochs = 10;
  int64_t batch_size = kDefaultBatchSize;
  bool shuffle = true;
  double validation_split = 0.0;  // the last fraction of (x, y), before shuffling, as Keras does
  const Tensor* validation_x = nullptr;  // validation_data
  const Tensor* validation_y = nullptr;
  std::optional<uint64_t> seed;  // shuffle and dropout; default: the compile seed
  int verbose = 1;  // 1: progress bar (redrawn on a terminal; a line per epoch otherwise), 0: none
  // Where the "Epoch i/n" lines and the bar go; empty: C's stdout (the command line).
  TextSink output;
  // Whether verbose=1 redraws the bar in place; unset: when `output` is empty and stdout is a
  // terminal.
  std::optional<bool> redraw;
  int initial_epoch = 0;  // resume: epochs before this one are counted as done
  // Keras's steps_per_epoch on arrays (EpochSteps): an epoch is this many batches of the current
  // pass over the data; unset: one whole pass.
  std::optional<int64_t> steps_per_epoch;
  // Validation on the first validation_steps batches only (unset: all), after every
  // validation_freq-th epoch (Keras's int form: epoch + 1 divisible by it).
  std::optional<int64_t> validation_steps;
  int validation_freq = 1;
  Callbacks callbacks;
  // What the progress line calls the accuracy (ProgressBar: the name it was compiled under).
  std::string metric_name = "accuracy";
  // Ctrl-C stops after the current step; the model is kept. false (measuring trials): fit runs
  // on, and a press during it is raised again for the previous handler when fit returns.
  bool stop_on_interrupt = true;
  // A second Ctrl-C in the same fit: true ends the process (the command line); false hands it to
  // the SIGINT handler that was in place before fit (Python's).
  bool second_interrupt_ends_process = true;
  // Keras's sample_weight: one weight per sample of x, shape (N,) or (N, 1). Each sample's loss
  // and gradient are multiplied by it; the loss is still the sum over the batch divided by the
  // batch's size (Keras's "sum_over_batch_size"), and the reported loss the mean over samples of
  // the weighted losses. The metrics are not weighted (Keras's `metrics`, not `weighted_metrics`).
  // With validation_split, the validation rows keep their weights, as Keras splits them.
  const Tensor* sample_weight = nullptr;
  // Keras's class_weight: a sample's weight is its class's (1 for a class not named here), the
  // class being the label rounded to an integer, or the argmax of a target row. The training rows
  // only: validation is not weighted by it. Not with sample_weight.
  std::map<int64_t, double> class_weight;
  // validation_data's sample weights (Keras's (x_val, y_val, sample_weight_val)).
  const Tensor* validation_sample_weight = nullptr;
};

// A loss with Keras's from_logits: the model's last layer gives logits (a linear output) and the
// loss applies softmax (the categorical cross-entropies) or sigmoid (binary cross-entropy) to them
// itself, as Keras's SparseCategoricalCrossentropy(from_logits=True) and the others do; predict
// then returns the logits.
struct LossSpec {
  std::string name;
  bool from_logits = false;
  // The loss's one argument (Huber's delta; backends/losses/unit.h, LossRules::parameter); NaN:
  // Keras's default.
  double parameter = std::numeric_limits<double>::quiet_NaN();
};

// One output's loss in a model of several outputs (Keras's compile(loss=[...], loss_weights=[...],
// metrics=[[...], ...])): the model's loss is the sum over outputs of weight x loss; each output's
// loss is reported unweighted, under "<output>_loss", and its metrics under their names as given
// (crossover.keras names them "<output>_<metric>", as Keras does).
struct OutputLoss {
  LossSpec loss;
  double weight = 1.0;
  std::vector<MetricSpec> metrics;
};

struct EvaluateOptions {
  int64_t batch_size = kDefaultBatchSize;
  int verbose = 1;
  TextSink output;      // where the result line goes; empty: C's stdout
  Callbacks callbacks;  // on_test_begin/end, and the test batch hooks of those that want them
  std::string metric_name = "accuracy";  // what the result line calls the accuracy
  // Keras's sample_weight (FitOptions::sample_weight): the loss weighted, the metrics not.
  const Tensor* sample_weight = nullptr;
};

struct EvaluateResult {
  double loss = 0;
  double accuracy = 0;
  // The compiled metrics other than "accuracy", in compile's order, by name: {"mae", 0.12}, ...
  // With several outputs (compile_outputs): each output's loss ("<output>_loss"), in the outputs'
  // order, then each output's metrics (its "accuracy" too), output by output; `accuracy` unused.
  std::vector<std::pair<std::string, double>> metrics;
  double seconds = 0;
  int64_t samples = 0;
};

// A named parameter as Keras stores it: "dense/kernel" (inputs, units), "dense/bias" (units).
struct NamedTensor {
  std::string name;
  Tensor value;
};

// A functional model's layers and how they connect (Keras's keras.Model(inputs, outputs)): layer
// i reads the outputs of the layers inputs[i] lists, each before it; the model's inputs are its
// InputLayers (inputs[i] empty; layers[0] is one), and the last layer's output is the model's
// (or output_layers', for several). A
// merging layer (Add, Concatenate) reads two or more, every other layer one. GraphBuilder makes
// one:
//
//   GraphBuilder g;
//   int x = g.input({784});
//   int h = g.add(Dense(64, "relu"), x);
//   int s = g.add(Add(), {g.add(Dense(64, "relu"), h), h});
//   Sequential model(g.graph(g.add(Dense(10, "softmax"), s)), "functional");
//
// A model of several inputs (Keras's keras.Model([a, b], ...)) takes each sample as one packed row:
// the values of its inputs side by side (each flattened), in the order of input_layers.
struct LayerGraph {
  std::vector<Layer> layers;
  std::vector<std::vector<int>> inputs;
  // The model's inputs in order: the indices of its InputLayers, each once. Empty: the
  // InputLayers in the order of `layers`.
  std::vector<int> input_layers;
  // The model's outputs in order (Keras's keras.Model(inputs, [a, b])): the indices of the layers
  // no layer reads, each once, the last layer among them. Empty: the last layer, the one output.
  // A model of several outputs has one loss per output (compile_outputs) and takes each sample's
  // targets as one packed row: each output's targets side by side, in this order (one column for
  // a sparse loss's class index, else the output's values flattened); predict gives the outputs
  // packed the same way, each output's values side by side.
  std::vector<int> output_layers;
  // A layer called more than once (Keras's shared layer: one layer, one set of weights, applied
  // to several tensors): shared_with[i] is the earlier entry whose layer entry i calls again, -1
  // (or an empty vector) for a layer's own first call. Such an entry is the same layer (the
  // model copies layers[shared_with[i]] into it) with inputs of its own; fit adds the gradients
  // of every call before the one update.
  std::vector<int> shared_with;
};

class GraphBuilder {
 public:
  // An input of the model: an InputLayer of this per-sample shape. First (then more may
  // follow, for a model of several inputs).
  int input(Shape shape, std::string name = "");
  // The layer applied to the outputs of `inputs` (layers this builder returned); its index.
  int add(Layer layer, std::vector<int> inputs);
  int add(Layer layer, int input) { return add(std::move(layer), std::vector<int>{input}); }
  // The layer of `call` (a layer this builder returned) called again on `inputs`: the same
  // weights (LayerGraph::shared_with). Its output shape is its own; its weights' shapes must be
  // those of the first call.
  int again(int call, std::vector<int> inputs);
  int again(int call, int input) { return again(call, std::vector<int>{input}); }
  // The layers that `output` and the add_loss terms (AddLoss, before it) depend on, in order,
  // ending with it (those they do not depend on are left out, as Keras leaves them out of
  // keras.Model(inputs, outputs)). The model's inputs
  // are the inputs made here, in `model_inputs`' order (empty: the order they were made in).
  LayerGraph graph(int output, std::vector<int> model_inputs = {}) const;
  // The same for a model of several outputs, in this order.
  LayerGraph graph(std::vector<int> outputs, std::vector<int> model_inputs) const;

 private:
  LayerGraph g_;
};

// Each entry's place among its layer's calls (Keras's node_index) for a graph's shared_with: 0
// for a layer's first call, 1 for its second, ...
std::vector<int64_t> call_numbers(const std::vector<int>& shared_with);
// Per entry of a graph's shared_with: 1 where its layer is called more than once (each of its
// calls, the first included), else 0.
std::vector<char> called_more_than_once(const std::vector<int>& shared_with);

// The model: a Sequential stack of layers (Keras's Sequential), or a graph of them (Keras's
// functional Model), trained the same way; the stack is the graph whose every layer reads the one
// before it.
class Sequential {
 public:
  // Requires: at least one layer; the first layer that needs it (Dense) knows its input size
  // from a Flatten/Input shape or from the data at the first fit/evaluate/predict.
  explicit Sequential(std::vector<Layer> layers, std::string name = "sequential");
  // A functional model (LayerGraph). Throws Error naming the layer for a graph that is not one:
  // an input index out of order, a layer read by none that is not an output, a merging
  // layer with fewer than two inputs, two layers of one name.
  explicit Sequential(LayerGraph graph, std::string name = "functional");
  ~Sequential();
  Sequential(Sequential&&) noexcept;
  Sequential& operator=(Sequential&&) noexcept;

  // Losses: "sparse_categorical_crossentropy", "categorical_crossentropy",
  // "binary_crossentropy", "mean_squared_error" (or "mse"). Metrics: Keras's names (nn/metrics.h):
  // "accuracy" (the one that goes with the loss), "mae", "mse", "root_mean_squared_error",
  // "categorical_accuracy", ...; each is reported under the name given, in the order given.
  void compile(OptimizerConfig optimizer, std::string_view loss,
               std::vector<std::string> metrics = {}, CompileOptions options = {});
  // The same with from_logits (a cross-entropy only; the last layer's activation must be linear).
  void compile(OptimizerConfig optimizer, const LossSpec& loss,
               std::vector<std::string> metrics = {}, CompileOptions options = {});
  // The same with the metrics as specs (metric_spec(name), renamed: a Keras metric object of a
  // kind under its own name=, e.g. MeanSquaredError(name="err")).
  void compile_with(OptimizerConfig optimizer, const LossSpec& loss,
                    std::vector<MetricSpec> metrics, CompileOptions options = {});
  // A loss (with its weight and metrics) per output, in output_layers()' order. One output: the
  // same as compile_with (its weight must be 1). Several: one loss head per output, each output
  // read by no other layer; trains in one process (not over ranks), without the fused step.
  // compile and compile_with on a model of several outputs give every output the same loss and
  // metrics (Keras's one loss for all outputs).
  void compile_outputs(OptimizerConfig optimizer, std::vector<OutputLoss> outputs,
                       CompileOptions options = {});

  // x: (N, features...) floats; y: (N,) class indices (sparse losses) or (N, C) targets.
  History fit(const Tensor& x, const Tensor& y, FitOptions options = {});
  // The same on a caller's buffers, read in place (not copied first): x holds
  // N * product(sample_shape) floats, y N labels.
  History fit(std::span<const float> x, Shape x_shape, std::span<const float> y, Shape y_shape,
              FitOptions options = {});
  EvaluateResult evaluate(const Tensor& x, const Tensor& y, EvaluateOptions options = {});
  // (N, outputs): the final layer's activations (probabilities for softmax).
  Tensor predict(const Tensor& x, int64_t batch_size = kDefaultBatchSize);
  // The same, calling on_predict_begin/end and the predict batch hooks of `callbacks`.
  Tensor predict(const Tensor& x, int64_t batch_size, const Callbacks& callbacks);

  // Keras-like table: layer (type), output shape, parameters; then totals.
  std::string summary() const;
  // Every parameter, as Keras's count_params(): batch normalization's moving statistics included.
  int64_t count_params() const;
  // Keras's "Trainable params": those of the layers that are trainable (Layer::trainable), not
  // batch normalization's moving statistics.
  int64_t trainable_params() const;
  const std::vector<Layer>& layers() const;
  // Keras's layer.trainable = value for the layer at this index of layers(): it counts at once
  // (summary(), trainable_params(), the model's JSON) and takes effect in fit at the next
  // compile(), as in Keras (also when called from a callback during fit). Throws Error for an
  // index out of range.
  void set_trainable(std::size_t layer, bool trainable);
  // Whether it was made from a LayerGraph (Keras's "Functional"), even one that is a chain.
  bool functional() const;
  // The layers each layer reads (LayerGraph::inputs); for a Sequential, each the one before.
  const std::vector<std::vector<int>>& layer_inputs() const;
  // Per entry of layers(): the earlier entry whose layer it calls again, or -1 for a layer's own
  // (first) call (LayerGraph::shared_with). A layer's weights, its row in summary() and its
  // entry in the model files are its first call's.
  const std::vector<int>& layer_shared_with() const;
  // The LayerGraph that makes this model again: its layers and their connections as above, its
  // input layers, and its output layers where it has several (empty for one, as LayerGraph takes
  // it). What a copy of a functional model is made from.
  LayerGraph layer_graph() const;
  const std::string& name() const;
  // The per-sample input shape, once known (empty before). A model of several inputs: the
  // packed row's (total values,) (LayerGraph).
  Shape input_shape() const;
  // The model's InputLayers in the model's input order (indices into layers()); a Sequential
  // without an InputLayer: {0}.
  const std::vector<int>& input_layers() const;
  // The model's outputs in order (indices into layers()): the last layer alone but for a
  // LayerGraph of several output_layers.
  const std::vector<int>& output_layers() const;
  // Each layer's per-sample output shape, as summary() shows them (empty before the input shape
  // is known).
  std::vector<Shape> layer_output_shapes() const;
  bool compiled() const;
  std::string device_name() const;
  // The dense GEMMs' arithmetic compile() chose (CompileOptions::precision, or the layers'
  // dtype policies' when that was empty; "" before compile).
  const std::string& precision() const;
  // With CompileOptions::fused_step: why the last fit did not use the fused step ("" when it did).
  const std::string& fused_step_note() const;

  // Parameters, named as Keras stores them, copied to/from the device.
  std::vector<NamedTensor> get_weights() const;
  // Requires the same names and shapes as get_weights(); throws Error naming the first mismatch.
  void set_weights(const std::vector<NamedTensor>& weights);
  // Optimizer state ("dense/kernel/slot1", "dense/kernel/slot2", and "dense/kernel/slot3" with
  // Adam's amsgrad, per parameter) and the step counter ("optimizer/step"), for checkpoints.
  std::vector<NamedTensor> get_optimizer_state() const;
  void set_optimizer_state(const std::vector<NamedTensor>& state);
  int64_t optimizer_steps() const;
  // Sets the optimizer step counter exactly (set_optimizer_state carries it as a float, exact
  // only up to 2^24 steps); for checkpoints.
  void set_optimizer_steps(int64_t steps);
  const OptimizerConfig& optimizer() const;
  const std::string& loss_name() const;
  // Whether the loss takes the last layer's output as logits (LossSpec::from_logits).
  bool from_logits() const;
  // The loss's one argument as compile took it (Huber's delta), NaN for a loss without one.
  double loss_parameter() const;
  // The metrics given to compile(), in order, as compile() takes them back ("acc" normalized to
  // "accuracy"; a renamed spec by its kind's name: metric_identifier).
  std::vector<std::string> metrics() const;
  // The same as compile_with took them.
  const std::vector<MetricSpec>& metric_specs() const;

  // For callbacks.
  void stop_training();
  double learning_rate() const;
  void set_learning_rate(double lr);

  // Makes the backend calls of one training step on `rows` samples exactly as fit makes each step
  // (the same step function, captured with Backend::capture and replayed once), on data of zeros:
  // for tools that install a backend (CompileOptions) to see what a step asks of it; perf/'s cost
  // model takes its op list from it. Requires a compiled model; `sample_shape` (one sample's
  // shape, as fit takes it from x) is needed when the input shape is not known yet. The step
  // updates the weights as fit would. Throws Error for rows < 1.
  void trace_training_step(int64_t rows, const Shape& sample_shape = {});

  // The gradients of the mean batch loss for one batch (x, y) with dropout off: for tests
  // (finite-difference checks) and tools; does not update the weights.
  std::vector<NamedTensor> gradients(const Tensor& x, const Tensor& y);

  // A custom training loop's step (Keras's `model(x, training=True)` under a tf.GradientTape,
  // `tape.gradient`, `optimizer.apply_gradients`), as fit's step split in three calls:
  //
  //   Tensor out = model.training_forward(x);            // what the caller sees
  //   TrainingGradients g = model.training_backward(y, {"sparse_categorical_crossentropy", true});
  //   model.apply_gradients(g.gradients);
  //
  // training_forward: the forward pass over the batch x in training mode, dropout drawn as fit's
  // step at the current optimizer step draws it, batch normalization normalizing with the batch's
  // statistics and taking them into its moving ones; returns the model's outputs as predict gives
  // them (the final activation applied). The pass's activations and masks stay for
  // training_backward. Requires a compiled model (for its device; its loss is not used).
  Tensor training_forward(const Tensor& x);
  // The loss `loss` (any of compile's, not necessarily the compiled one) of the last
  // training_forward's outputs against the targets y, averaged over the batch, and its gradient
  // with respect to every parameter a training step updates (trainable_gradient_names(), named
  // and ordered as get_weights()). Once per training_forward. Throws Error when there is no such
  // pass to differentiate: none yet, or the model ran or changed since (fit, evaluate, predict,
  // another pass, new weights), so that the outputs the caller holds are not those the gradients
  // would be of.
  struct TrainingGradients {
    double loss = 0;
    std::vector<NamedTensor> gradients;
  };
  TrainingGradients training_backward(const Tensor& y, const LossSpec& loss);
  // training_backward for a loss the caller computed from the outputs (a custom loop's own
  // arithmetic on them): `output_gradient` is that loss's gradient with respect to the last
  // training_forward's outputs as it returned them (the final activation applied), of their
  // shape; backpropagated through the final activation and the layers to every parameter a
  // training step updates (named and ordered as training_backward's). Once per
  // training_forward; throws Error as training_backward does, and for a gradient of another
  // shape.
  std::vector<NamedTensor> training_backward_outputs(const Tensor& output_gradient);
  // The compiled optimizer's update (or use_optimizer's) with these gradients, one per parameter
  // a training step updates, in trainable_gradient_names()' order and shapes (a caller may have
  // changed their values, e.g. clipped them): the same update as fit's step (the step counter,
  // the learning-rate schedule, clipnorm and clipvalue; moving statistics and frozen layers
  // untouched). Throws Error naming the first gradient that does not match.
  void apply_gradients(const std::vector<NamedTensor>& gradients);
  // The parameters training_backward returns gradients for and apply_gradients takes, in order.
  std::vector<std::string> trainable_gradient_names() const;
  // The optimizer of apply_gradients and fit from now on, its state (slots, step counter) started
  // afresh, as a new Keras optimizer starts: a model never compiled by its user trains with the
  // optimizer of its custom loop.
  void use_optimizer(OptimizerConfig optimizer);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace crossover
