// Sequential::Impl: what joins the model's parts (docs/ARCHITECTURE.md "The model as parts"). It
// owns them (the graph, graph.h; the parameter arena, parameters.h; the step plan, plan.h; the
// gradient exchange, exchange.h; the loss heads, heads.h), the layers' states, the backend and
// the step counters. Its functions are defined in a file per job: state.cpp (building,
// allocating, the counters), data.cpp (the data), step.cpp (a training and an evaluation step),
// fit_loop.cpp (evaluation's loop; fit's is FitLoop, fit_loop.h), compile.cpp; nn/sequential.cpp
// is the front.
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
#include "nn/model/heads.h"
#include "nn/model/parameters.h"
#include "nn/model/plan.h"
#include "nn/progress.h"
#include "nn/sequential.h"

namespace crossover {

using Clock = std::chrono::steady_clock;

struct Sequential::Impl {
  using Param = LayerParam;
  using LayerInfo = LayerState;
  using Plan = StepBuffers;
  // Data copied to the device once per fit/evaluate, as the steps read it: x_rows (n, x_cols) and
  // y_rows (n, y_cols) are the caller's own memory when the backend reads host memory (the CPU; the
  // caller keeps it alive and unchanged during the call), else the copies in x and y on the device.
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
  bool built = false;
  std::vector<LayerInfo> info;

  bool is_compiled = false;
  OptimizerConfig opt;
  CompileOptions copts;
  std::unique_ptr<Backend> backend;
  DeviceBlock counters;  // StepCounters for training, then one for evaluation
  // The parts that hold device memory, after `backend`: freed before it.
  ParameterArena arena;
  std::unique_ptr<GradientExchange> exchange;
  LossHeads losses{graph, info, built};
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

  // The floats of one sample's input row (the packed row with several inputs).
  int64_t input_width() const {
    return graph.several_inputs() ? graph.packed_width : info.front().in_width;
  }

  void build(const Shape& given_shape);
  const Shape& layers_output_shape() const { return losses.layers_output_shape(); }
  int64_t output_width() const { return losses.output_width(); }
  // x's samples for `who`: x checked to be (samples, features...), the model built for their
  // shape (the first time: later, the shape checked) and its parameters allocated.
  void build_for(const Tensor& x, const char* who);

  // needs_grad from the parameters and trains.
  void mark_gradients();
  // Takes each layer's Layer::trainable for the step (the constructor's and compile's).
  void take_trainable();
  // Whether a training step updates the parameter: a trainable variable of a layer the model was
  // compiled with trainable.
  bool updates(const Param& p) const { return ParameterArena::updates(p, trains); }

  // ---- parameters ----

  // trainable_only: Keras's "Trainable params", which follow layer.trainable at once.
  int64_t param_count(bool trainable_only = false) const {
    return trainable_only ? arena.trainable_count(graph.layers) : arena.count();
  }

  // The parameter arena for the compiled optimizer, fresh step counters, the initial weights
  // (CompileOptions::initialize_weights); every plan dropped.
  void allocate_parameters();

  StepCounters* train_counters() const { return counters.as<StepCounters>(); }
  StepCounters* eval_counters() const { return counters.as<StepCounters>() + losses.tallies(); }
  // The phase's counters, the model's then each head's (read now: a synchronisation).
  std::vector<StepCounters> read_tally(const StepCounters* c) const;

  StepCounters read_counters(const StepCounters* c) const;
  void write_counters(StepCounters* c, const StepCounters& h);
  void write_tally(StepCounters* c, const std::vector<StepCounters>& t);

  // ---- the step plan (nn/model/plan.h), for this model's losses ----
  Plan& plan_for(int64_t batch) {
    return steps.for_batch(batch, losses.buffer_widths(input_width()), losses.loss_outputs());
  }
  float* layer_output(const Plan& plan, std::size_t i, bool training) const {
    return steps.layer_output(plan, i, training);
  }
  const float* final_output(const Plan& plan, bool training) const {
    return steps.final_output(plan, training);
  }
  // Forward over m rows of plan.input (StepPlan::forward), counted in `passes`.
  // loss_rows > 0: a pass whose loss is asked for, with the layers' loss terms (activity
  // regularizers, add_loss) over a global batch of that many rows.
  void forward(Plan& plan, int64_t m, bool training, bool final_activation, uint64_t seed,
               StepCounters* ctr, int64_t first_row = 0, int64_t loss_rows = 0) {
    ++passes;
    steps.forward(plan, m, training, final_activation, losses.loss_outputs(), seed, ctr, first_row,
                  loss_rows);
  }
  void update_moving_statistics(Plan& plan) { steps.update_moving_statistics(plan); }
  // Backward from the losses' gradients (StepPlan::backward).
  void backward(Plan* plan, int64_t m, const StepCounters* update = nullptr,
                int64_t loss_rows = 0) {
    steps.backward(plan, m, losses.loss_outputs(), update, false, loss_rows);
  }

  // CompileOptions::fused_step: fit's steps as one kernel each, when the model and the device
  // take it (fused_mlp); fused_note says why not.
  std::optional<FusedMlpStep> fused_mlp;
  std::string fused_note;
  void plan_fused_step(const Plan& plan, const DeviceData& d, uint64_t seed);

  // Whether a training step updates each Dense layer with its weight gradient, in one backend call
  // (the backend gains from it, and nothing needs the global gradient norm first).
  bool fused_update() const;

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

  // ---- data ----

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
