// compile: the loss, the metrics, the device and its backend; several outputs' heads.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <set>

#include "backends/devices.h"
#include "backends/losses/list.h"
#include "core/error.h"
#include "core/launcher.h"
#include "nn/layers/kind.h"
#include "nn/metrics.h"
#include "nn/model/impl.h"

namespace crossover {

namespace {

// kMaxMetrics besides "accuracy"; the metrics that read class indices only with the sparse loss's
// targets, the categorical ones only with a target row per sample.
std::vector<MetricSpec> compile_metrics(std::vector<MetricSpec> given, LossKind loss) {
  std::vector<MetricSpec> specs;
  int extra = 0;
  const bool sparse = loss_rules(loss).class_index_targets;
  for (MetricSpec& spec : given) {
    const std::string name = spec.name;
    const std::string key = spec.loss_accuracy ? "accuracy" : spec.name;
    for (const MetricSpec& other : specs)
      if ((other.loss_accuracy ? "accuracy" : other.name) == key)
        throw Error("compile", "metric '" + name + "' is given twice (its History key '" + key +
                                   "' would be the same): give each metric once");
    if (!spec.loss_accuracy) {
      if (++extra > kMaxMetrics)
        throw Error("compile", "metric '" + name + "': at most " + std::to_string(kMaxMetrics) +
                                   " metrics besides 'accuracy' are computed");
      if (reads_class_indices(spec.kind) && !sparse)
        throw Error("compile", "metric '" + name +
                                   "' reads class indices, which only the loss "
                                   "sparse_categorical_crossentropy takes as targets");
      if (sparse && !reads_class_indices(spec.kind) &&
          spec.kind != MetricKind::categorical_accuracy &&
          spec.kind != MetricKind::top_k_categorical_accuracy)
        throw Error("compile", "metric '" + name +
                                   "' compares the output with the targets value by value, but "
                                   "sparse_categorical_crossentropy's targets are class indices "
                                   "(Keras fails on their shapes)");
      if (sparse && (spec.kind == MetricKind::categorical_accuracy ||
                     spec.kind == MetricKind::top_k_categorical_accuracy))
        throw Error("compile", "metric '" + name +
                                   "' reads one-hot targets, but sparse_categorical_crossentropy "
                                   "takes class indices: use sparse_" +
                                   (spec.kind == MetricKind::categorical_accuracy
                                        ? std::string("categorical_accuracy")
                                        : std::string("top_k_categorical_accuracy")));
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

}  // namespace

void Sequential::compile(OptimizerConfig optimizer, std::string_view loss,
                         std::vector<std::string> metrics, CompileOptions options) {
  compile(optimizer, LossSpec{std::string(loss), false}, std::move(metrics), std::move(options));
}

void Sequential::compile(OptimizerConfig optimizer, const LossSpec& spec,
                         std::vector<std::string> metrics, CompileOptions options) {
  std::vector<MetricSpec> specs;
  for (const std::string& name : metrics) specs.push_back(metric_spec(name));
  compile_with(optimizer, spec, std::move(specs), std::move(options));
}

namespace {

// from_logits takes a final softmax's or sigmoid's input back as the logits (the step leaves the
// activation to the loss), but an activity regularizer on that layer penalizes its activated
// output, which the step then does not compute.
void refuse_logits_under_activity(const ModelGraph& g, int layer, bool from_logits) {
  const Layer& l = g.layers[static_cast<std::size_t>(layer)];
  const ActivationKind a = layer_kind(l).activation(l).kind;
  if (from_logits && l.activity.any() &&
      (a == ActivationKind::softmax || a == ActivationKind::sigmoid))
    throw Error("compile",
                fmt::format("from_logits=True on output '{}', whose activity_regularizer reads its "
                            "{} output, is not supported (yet): the loss would take the "
                            "activation's input back as the logits",
                            l.name, activation_name(a)));
}

void refuse_during_fit(const Sequential::Impl& m) {
  if (m.fitting)
    throw Error("compile", "called during fit (from a callback): the model is being trained");
}

// compile's loss, metrics and device; with several outputs the heads are set already (spec is
// the first output's loss, metrics empty).
void compile_model(Sequential::Impl& m, OptimizerConfig optimizer, const LossSpec& spec,
                   std::vector<MetricSpec> metrics, CompileOptions options) {
  refuse_during_fit(m);
  // from_logits with a final activation is Keras's too (final_activation_layer).
  const LossConfig loss = parse_loss(spec, "compile");
  if (m.losses.heads.empty())
    refuse_logits_under_activity(m.graph, static_cast<int>(m.graph.size()) - 1, spec.from_logits);
  const std::string loss_name(loss_rules(loss.kind).name);
  std::vector<MetricSpec> compiled_metrics = compile_metrics(std::move(metrics), loss.kind);
  if (m.built && m.losses.heads.empty())
    m.losses.check_output_for_loss(loss.kind, loss_name, compiled_metrics);
  m.losses.loss = loss;
  m.losses.from_logits = spec.from_logits;
  m.losses.loss_name = loss_name;
  m.losses.metrics = std::move(compiled_metrics);
  m.losses.accuracy = std::any_of(m.losses.metrics.begin(), m.losses.metrics.end(),
                                  [](const MetricSpec& s) { return s.loss_accuracy; });
  m.losses.extra_metrics =
      static_cast<int>(std::count_if(m.losses.metrics.begin(), m.losses.metrics.end(),
                                     [](const MetricSpec& s) { return !s.loss_accuracy; }));
  if (options.threads < 0) throw Error("compile", "threads must be 0 (all cores) or positive");
  // The layers' dtype policies decide; an explicit precision must agree (model_precision).
  options.precision = precision_name(model_precision(m.graph.layers, options.precision));
  const int ranks = options.collective ? options.collective->size() : 1;
  if (ranks > 1 && !m.losses.heads.empty())
    throw Error("compile", fmt::format("a model of several outputs trains in one process (yet), "
                                       "not over {} ranks",
                                       ranks));
  if (const LaunchedRanks l = launched_ranks(); l.size > 1 && !options.collective)
    throw Error("compile",
                fmt::format("this process is rank {} of {} started by a parallel launcher ({}), "
                            "but crossover trains in one process here: the {} processes would each "
                            "train their own copy of the model; run a single process (or give "
                            "compile a Collective of the {} ranks: CompileOptions::collective)",
                            l.rank, l.size, l.source, l.size, l.size));
  auto backend = options.make_backend
                     ? options.make_backend()
                     : make_backend(options.device, options.threads,
                                    parse_precision(options.precision, "precision"));
  if (!backend) throw Error("compile", "make_backend returned no backend");
  if (options.wrap_backend) backend = options.wrap_backend(std::move(backend));
  if (ranks > 1 && backend->device_name() != "cpu" && !options.collective->on_device())
    throw Error("compile",
                fmt::format("training over {} ranks on {} needs a collective that sums GPU "
                            "memory (NCCL); {} has none: train on the CPU, or use a crossover "
                            "built with NCCL (CROSSOVER_NCCL)",
                            ranks, backend->device_name(), options.collective->description()));
  for (const Layer& l : m.graph.layers) {
    layer_kind(l).check_device(l, *backend, ranks);
  }
  m.steps.clear();
  m.arena.reset();
  m.counters.reset();
  m.backend = std::move(backend);
  m.exchange = make_gradient_exchange(options.collective.get());
  m.opt = optimizer;
  m.copts = options;
  m.is_compiled = true;
  m.take_trainable();
  if (m.built) m.allocate_parameters();
}

}  // namespace

void Sequential::compile_with(OptimizerConfig optimizer, const LossSpec& spec,
                              std::vector<MetricSpec> metrics, CompileOptions options) {
  Impl& m = *impl_;
  if (m.graph.several_outputs()) {  // Keras's one loss for every output, each its metrics
    std::vector<OutputLoss> outputs;
    for (int o : m.graph.model_outputs) {
      OutputLoss out{spec, 1.0, metrics};
      for (MetricSpec& s : out.metrics)
        s.name = m.graph.layers[static_cast<std::size_t>(o)].name + "_" + s.name;
      outputs.push_back(std::move(out));
    }
    return compile_outputs(optimizer, std::move(outputs), std::move(options));
  }
  refuse_during_fit(m);
  m.losses.heads.clear();
  compile_model(m, optimizer, spec, std::move(metrics), std::move(options));
}

void Sequential::compile_outputs(OptimizerConfig optimizer, std::vector<OutputLoss> outputs,
                                 CompileOptions options) {
  Impl& m = *impl_;
  refuse_during_fit(m);
  if (outputs.size() != m.graph.model_outputs.size())
    throw Error("compile", fmt::format("the model has {} outputs, but {} losses were given: give "
                                       "one per output",
                                       m.graph.model_outputs.size(), outputs.size()));
  if (!m.graph.several_outputs()) {
    if (outputs[0].weight != 1.0)
      throw Error("compile", "a loss weight on a model of one output is not supported (yet)");
    m.losses.heads.clear();
    return compile_model(m, optimizer, outputs[0].loss, std::move(outputs[0].metrics),
                         std::move(options));
  }
  std::vector<LossHead> heads;
  std::set<std::string> keys;
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    OutputLoss& o = outputs[j];
    LossHead h;
    h.layer = m.graph.model_outputs[j];
    const std::string& out_name = m.graph.layers[static_cast<std::size_t>(h.layer)].name;
    h.loss = parse_loss(o.loss, "compile");
    refuse_logits_under_activity(m.graph, h.layer, o.loss.from_logits);
    h.loss_name = loss_rules(h.loss.kind).name;
    h.from_logits = o.loss.from_logits;
    if (!std::isfinite(o.weight))
      throw Error("compile", fmt::format("loss weight {} of output '{}' is not a finite number",
                                         o.weight, out_name));
    h.weight = static_cast<float>(o.weight);
    h.metrics = compile_metrics(std::move(o.metrics), h.loss.kind);
    h.extra_metrics = static_cast<int>(std::count_if(
        h.metrics.begin(), h.metrics.end(), [](const MetricSpec& s) { return !s.loss_accuracy; }));
    for (const std::string& key : {out_name + "_loss"})
      if (!keys.insert(key).second)
        throw Error("compile", "two outputs would report '" + key + "': name them apart");
    for (const MetricSpec& s : h.metrics)
      if (!keys.insert(s.name).second)
        throw Error("compile", "metric '" + s.name + "' is reported twice: name each apart");
    if (m.built)
      m.losses.check_output_for_loss(h.loss.kind, h.loss_name, h.metrics,
                                     m.info[static_cast<std::size_t>(h.layer)].out_shape);
    heads.push_back(std::move(h));
  }
  m.losses.heads = std::move(heads);
  compile_model(m, optimizer, outputs[0].loss, {}, std::move(options));
}

}  // namespace crossover
