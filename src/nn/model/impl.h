// Sequential::Impl: the model's state, shared by the files of src/nn/model/ (each one job:
// structure.cpp the graph and the layers' states, parameters.cpp the parameter arena, step.cpp
// the step plan, exchange.cpp the ranks, heads.cpp the losses and metrics, data.cpp the data,
// fit_loop.cpp the epochs, compile.cpp compile) and by nn/sequential.cpp, the front.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/fused_mlp.h"
#include "nn/callbacks.h"
#include "nn/device_memory.h"
#include "nn/layers/kind.h"
#include "nn/metrics.h"
#include "nn/model/exchange.h"
#include "nn/model/graph.h"
#include "nn/model/parameters.h"
#include "nn/model/plan.h"
#include "nn/progress.h"
#include "nn/sequential.h"

namespace crossover {

using Clock = std::chrono::steady_clock;

// The loss compile's spec names (a unit's name or alias, losses/list.h), with its argument
// (Keras's default where the spec has none); from_logits only where the unit reads logits.
LossConfig parse_loss(const LossSpec& spec, const char* who);

struct Sequential::Impl {
  using Param = LayerParam;
  using LayerInfo = LayerState;
  using Plan = StepBuffers;
  // Data copied to the device once per fit/evaluate.
  // A data set as the steps read it: x_rows (n, x_cols) and y_rows (n, y_cols) are the caller's
  // own memory when the backend reads host memory (the CPU; the caller keeps it alive and
  // unchanged during the call), else the copies in x and y on the device.
  // w_rows: one sample weight per row (Keras's sample_weight), or null.
  struct DeviceData {
    DeviceBlock x, y, w, indices;
    const float* x_rows = nullptr;
    const float* y_rows = nullptr;
    const float* w_rows = nullptr;
    int64_t n = 0, x_cols = 0, y_cols = 0;
  };

  ModelGraph graph;
  // Whether a layer's output needs a gradient: it or a layer it reads has parameters that fit
  // updates (a frozen layer's, and those of the layers below the first trainable one, need none).
  std::vector<bool> needs_grad;
  // Each layer's Layer::trainable as the step uses it: taken when the model is made and at each
  // compile (Keras: a change of layer.trainable takes effect at the next compile()).
  std::vector<char> trains;
  Shape input_shape;
  // With several outputs, one loss head per output in model_outputs' order (compile_outputs);
  // empty with one output, whose loss is the fields below (loss, from_logits, metrics, ...).
  // Each head's sums go to its own StepCounters after the model's (tallies()).
  struct Head {
    int layer = 0;
    LossConfig loss;
    std::string loss_name;
    bool from_logits = false;
    float weight = 1.0f;
    std::vector<MetricSpec> metrics;  // under the names they are reported by
    int extra_metrics = 0;
  };
  std::vector<Head> heads;
  bool built = false;
  std::vector<LayerInfo> info;

  bool is_compiled = false;
  OptimizerConfig opt;
  std::string loss_name;
  LossConfig loss;
  bool from_logits = false;
  bool accuracy = false;
  // The compiled metrics in compile's order (nn/metrics.h); those other than the loss's accuracy
  // ("extra") sum into StepCounters::metric_sums in their order.
  std::vector<MetricSpec> metrics;
  int extra_metrics = 0;
  CompileOptions copts;
  std::unique_ptr<Backend> backend;
  DeviceBlock counters;  // StepCounters for training, then one for evaluation
  // The parts that hold device memory, after `backend`: freed before it.
  ParameterArena arena;
  std::unique_ptr<GradientExchange> exchange;
  StepPlan steps{PlanInputs{&backend, &graph, &info, &arena, &trains, &needs_grad, &opt}};
  bool stop_requested = false;
  bool fitting = false;  // inside fit: callbacks may look at the model, not rebuild it
  bool graphs_dirty = false;
  // Counts the forward passes and the parameter changes from outside a step (set_weights,
  // allocation, apply_gradients): training_backward differentiates the training_forward pass
  // only while nothing has run or changed since (`tape`).
  int64_t passes = 0;
  struct TapePass {
    bool ready = false;
    int64_t pass = 0, rows = 0;
  } tape;

  // ---- structure ----
  // The graph checked (ModelGraph), each layer's trainable taken, and the layers built when
  // the model declares its input shape.
  void init(LayerGraph g, std::string model_name, bool is_functional);

  // Keras's (N, 28, 28) images for a model declared with Input((28, 28, 1)): the same values, one
  // channel; the declared shape stands.
  static Shape with_channel(const Shape& sample_shape, const Shape& declared);

  // The StepCounters of one phase (training, evaluation): the model's (its step, learning rate;
  // with one output its loss and metrics), then one per loss head.
  int tallies() const { return 1 + static_cast<int>(heads.size()); }
  // The floats of one sample's input row (the packed row with several inputs).
  int64_t input_width() const {
    return graph.several_inputs() ? graph.packed_width : info.front().in_width;
  }

  void build(const Shape& given_shape);
  // x's samples for `who`: x checked to be (samples, features...), the model built for their
  // shape (the first time: later, the shape checked) and its parameters allocated.
  void build_for(const Tensor& x, const char* who);

  // A non-flat output (samples of shape (H, W, C)) for this loss and these metrics: Keras
  // computes mean_squared_error, binary_crossentropy and the element-wise metrics element by
  // element and averages them all, which is the flat computation on (N, H*W*C); the losses and
  // metrics that read the last axis as classes would need it per position, which crossover
  // does not do (yet).
  void check_output_for_loss(LossKind kind, const std::string& what,
                             const std::vector<MetricSpec>& specs) const;
  // Each output's loss and metrics on its shape.
  void check_losses() const;
  void check_output_for_loss(LossKind kind, const std::string& what,
                             const std::vector<MetricSpec>& specs, const Shape& out) const;

  // needs_grad from the parameters and trains.
  void mark_gradients();
  // Takes each layer's Layer::trainable for the step (the constructor's and compile's).
  void take_trainable();
  // Whether a training step updates the parameter: a trainable variable of a layer the model was
  // compiled with trainable.
  bool updates(const Param& p) const { return ParameterArena::updates(p, trains); }

  const Shape& layers_output_shape() const { return info.back().out_shape; }
  int64_t output_width() const { return info.back().out_width; }

  // The activation applied by the loss op: that of the last layer if it is Dense or Activation.
  // With from_logits the loss reads the model's output as logits, so the layer applies its own
  // activation, except sigmoid and softmax: Keras takes their input back as the logits (and
  // warns), which is the deferred output.
  int final_activation_layer() const;
  // The same for the output layer `out` under a loss with or without from_logits: `out`, or -1.
  int deferred_layer(int out, bool logits, LossKind kind) const;
  // The outputs the losses read (the last layer's, or each head's), with whether the loss op
  // applies each one's activation (StepPlan's LossOutput). Into a member: a step allocates nothing.
  std::span<const LossOutput> loss_outputs() const;
  mutable std::vector<LossOutput> loss_outputs_;
  // The widths of the buffers the loss heads read and write (StepPlan::for_batch).
  BufferWidths buffer_widths() const;
  // A head's loss_activation and metrics_activate.
  ActivationKind head_loss_activation(const Head& h) const;
  bool head_metrics_activate(const Head& h) const;
  int64_t head_width(const Head& h) const;
  // Its columns of the packed targets: one (a class index) for the sparse loss, else the output's.
  int64_t head_target_width(const Head& h) const;
  int64_t head_target_column(std::size_t j) const;
  ActivationKind final_activation() const;
  // The activation the loss op applies to the final output: with from_logits the loss's own
  // softmax or sigmoid of the logits (final_activation_layer).
  ActivationKind loss_activation() const;

  // Whether the metrics read the final sigmoid or softmax of the deferred output: with
  // from_logits, the loss read that output as logits and the model's output is its activation.
  bool metrics_activate() const;

  // ---- parameters ----

  // trainable_only: Keras's "Trainable params", which follow layer.trainable at once.
  int64_t param_count(bool trainable_only = false) const {
    return trainable_only ? arena.trainable_count(graph.layers) : arena.count();
  }

  // The parameter arena for the compiled optimizer, fresh step counters, the initial weights
  // (CompileOptions::initialize_weights); every plan dropped.
  void allocate_parameters();

  StepCounters* train_counters() const { return counters.as<StepCounters>(); }
  StepCounters* eval_counters() const { return counters.as<StepCounters>() + tallies(); }
  // Head j's counters after the model's own `c` (train_counters() or eval_counters()).
  static StepCounters* head_counters(StepCounters* c, std::size_t j) { return c + 1 + j; }
  // The phase's counters, the model's then each head's (read now: a synchronisation).
  std::vector<StepCounters> read_tally(const StepCounters* c) const;

  StepCounters read_counters(const StepCounters* c) const;
  void write_counters(StepCounters* c, const StepCounters& h);
  void write_tally(StepCounters* c, const std::vector<StepCounters>& t);

  // ---- the step plan (nn/model/plan.h), for this model's losses ----
  Plan& plan_for(int64_t batch) { return steps.for_batch(batch, buffer_widths(), loss_outputs()); }
  float* layer_output(const Plan& plan, std::size_t i, bool training) const {
    return steps.layer_output(plan, i, training);
  }
  // Forward over m rows of plan.input (StepPlan::forward), counted in `passes`.
  void forward(Plan& plan, int64_t m, bool training, bool final_activation, uint64_t seed,
               StepCounters* ctr, int64_t first_row = 0) {
    ++passes;
    steps.forward(plan, m, training, final_activation, loss_outputs(), seed, ctr, first_row);
  }
  void update_moving_statistics(Plan& plan) { steps.update_moving_statistics(plan); }
  // Backward from the losses' gradients (StepPlan::backward).
  void backward(Plan* plan, int64_t m, const StepCounters* update = nullptr) {
    steps.backward(plan, m, loss_outputs(), update);
  }

  // CompileOptions::fused_step: fit's steps as one kernel each, when the model and the device
  // take it (fused_mlp); fused_note says why not.
  std::optional<FusedMlpStep> fused_mlp;
  std::string fused_note;
  void plan_fused_step(const Plan& plan, const DeviceData& d, uint64_t seed);

  // Whether a training step updates each Dense layer with its weight gradient, in one backend call
  // (the backend gains from it, and nothing needs the global gradient norm first).
  bool fused_update() const;

  const float* final_output(const Plan& plan, bool training) const;

  void gather_batch(Plan& plan, const DeviceData& d, int64_t m, const StepCounters* ctr);

  // The batch's sample weights for the loss: null without them (the unweighted loss).
  static const float* batch_weights(const Plan& plan, const DeviceData& d);

  // plan's weights block, before a step that gathers sample weights is captured.
  void with_weights(Plan& plan, const DeviceData& d);

  int ranks() const { return exchange ? exchange->ranks() : 1; }
  int rank() const { return exchange ? exchange->rank() : 0; }

  // One rank's part of a training step: `rows` rows of the global batch of `global_rows`, from
  // global row `first_row` (all of it, from 0, in one process).
  struct Shard {
    int64_t rows = 0, first_row = 0, global_rows = 0;
  };

  void train_step(Plan& plan, const DeviceData& d, const Shard& s, uint64_t seed);

  void eval_step(Plan& plan, const DeviceData& d, int64_t m);

  // Each compiled metric beyond the loss's accuracy: its per-sample values over these m rows of
  // the model's output, added to its sum in ctr (device memory; no call without such metrics).
  void metric_sums(const Plan& plan, int64_t m, bool training, StepCounters* ctr);

  // Each output's loss over these m rows (its targets' columns of the packed batch first), into
  // its head's counters after ctr, and in training its gradient, times its weight, into
  // plan.grads[j] (backward's pending gradient of that output); then its metrics.
  void head_losses(Plan& plan, const DeviceData& d, int64_t m, int64_t mean_rows, bool training,
                   StepCounters* ctr);

  // ---- data ----
  // The columns of a sample's targets: the packed row's with several outputs.
  int64_t target_columns() const;

  void check_xy(const Tensor& x, const Tensor& y, const char* who) const;

  // Several outputs: y holds each sample's targets as one packed row (LayerGraph::output_layers);
  // a sparse loss's column holds class indices of its output.
  void check_packed_targets(const Tensor& y, int64_t n, const char* who) const;

  // Targets y of n samples for the loss `kind` (named `kind_name`) on the model's output.
  void check_targets(const Tensor& y, int64_t n, const char* who, LossKind kind,
                     const std::string& kind_name) const;

  // Targets of n samples for a loss computed value by value: the output's shape, or (as Keras
  // squeezes or expands a last axis of 1 before the loss) that shape with a last axis of 1
  // dropped or added; the same values in the same order as the output's.
  bool targets_fit_output(const Tensor& y, int64_t n) const;

  // Rows [begin, end) of (x, y) and of the sample weights w (null: none).
  DeviceData upload_data(const Tensor& x, const Tensor& y, int64_t begin, int64_t end,
                         const Tensor* w = nullptr);

  void upload_weights(DeviceData& d, const Tensor& w, int64_t begin, bool in_place);

  // Keras's sample weights: one per sample of x, shape (n,) or (n, 1), finite (Keras takes any
  // number; infinity or NaN would only turn the loss into NaN).
  static void check_weights(const Tensor& w, int64_t n, const char* who, const char* what);

  // Keras's class_weight_to_sample_weights: each sample weighted by its class's weight (1 for a
  // class the map does not name); the class is the label rounded to an integer, or the argmax of
  // a target row of several columns.
  Tensor class_weight_samples(const Tensor& y, const std::map<int64_t, double>& class_weight,
                              int64_t n) const;

  void require_compiled(const char* who) const;
  void require_one_output(const char* who) const;

  Shape sample_shape_of(const Tensor& x) const;

  // The loss and the compiled metrics of the sums in c, as logs name them, in compile's order.
  std::vector<std::pair<std::string, double>> metric_values(const StepCounters& c,
                                                            const std::string& prefix) const;
  // The metrics beyond "accuracy", by name, from the sums in c.
  std::vector<std::pair<std::string, double>> extra_results(const StepCounters& c) const;
  // The result of a phase's counters (the model's, then each head's: read_tally): with several
  // outputs the loss is the sum of weight x each output's mean loss, and `metrics` each output's
  // loss then each output's metrics (EvaluateResult).
  EvaluateResult result_of(std::span<const StepCounters> t) const;
  std::vector<std::pair<std::string, double>> values_of(std::span<const StepCounters> t,
                                                        const std::string& prefix) const;

  std::vector<std::pair<std::string, double>> named_values(
      double loss_value, double accuracy_value,
      const std::vector<std::pair<std::string, double>>& extra, const std::string& prefix) const;

  // The running loss and accuracy of `c` (read now: a synchronisation), as a batch hook's logs.
  Logs logs_of(const StepCounters* c) const;

  // The loss and accuracy over d's rows, in batches of at most `batch`. With ranks, d holds this
  // rank's share of the rows (split_data; none: nullptr) and the sums are added over the ranks, so
  // every rank returns the result over all rows.
  // `hooks`: the test phase's (on_test_begin/end around it, and its batch hooks).
  EvaluateResult run_evaluation(const DeviceData* d, int64_t batch, bool use_graphs,
                                BatchHooks& hooks);

  // With ranks: the loss, accuracy and metric sums and the sample count added over every rank.
  void sum_over_ranks(StepCounters& c) const;

  // Rows [begin, end) of (x, y) for evaluation: all of them in one process; with ranks, this
  // rank's share (rank_rows), or nothing when it has none.
  std::optional<DeviceData> split_data(const Tensor& x, const Tensor& y, int64_t begin, int64_t end,
                                       const Tensor* w = nullptr);

  // With ranks, every rank starts from rank 0's parameters, optimizer state and step: identical
  // by the seed already, unless the ranks loaded different files.
  void share_parameters();

  // ---- fit, in steps ----
  static void check_fit_options(const FitOptions& o);

  // fit's sample weights checked; class_weight's, one per sample of y (empty without it).
  Tensor fit_weights(const Tensor& x, const Tensor& y, const FitOptions& o) const;

  // One fit's rows on the device: the training rows, and the validation rows (with ranks, each
  // rank evaluates its share of them: run_evaluation adds them up).
  struct FitData {
    DeviceData train;
    std::optional<DeviceData> val;
    bool validate = false;
    int64_t n_train = 0;
    int64_t batch = 0;  // the global batch
  };

  // train_weights: the training rows' sample weights (o.sample_weight, or class_weight's), or
  // null; the validation rows are weighted by o.validation_sample_weight (validation_data) or by
  // their rows of o.sample_weight (validation_split), as Keras splits (x, y, sample_weight).
  FitData fit_data(const Tensor& x, const Tensor& y, const FitOptions& o,
                   const Tensor* train_weights);
};

}  // namespace crossover
