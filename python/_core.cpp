// crossover._core: the library's Sequential, layers and optimizers for Python (nanobind).
//
// A thin layer: every call goes straight to the C++ API (nn/sequential.h, nn/layers.h,
// nn/optimizers.h); crossover/keras/ (Python) gives them Keras's names and defaults. Arrays come
// in as C-contiguous float32 numpy views (the caller converts other dtypes once) and go out as
// numpy arrays that own a copy. crossover::Error becomes ValueError with the library's message.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "_core_callbacks.h"
#include "backends/losses/list.h"
#include "crossover.h"
#include "nn/layers/kind.h"
#include "nn/progress.h"
#include "perf/threads.h"

namespace nb = nanobind;
using namespace crossover;
using crossover_python::python_callbacks;
using crossover_python::python_stderr_line;
using crossover_python::python_stdout;

namespace {

using FloatArray = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
using NumpyArray = nb::ndarray<nb::numpy, float>;

Shape shape_of(const FloatArray& a) {
  Shape s(a.ndim());
  for (std::size_t i = 0; i < a.ndim(); ++i) s[i] = static_cast<int64_t>(a.shape(i));
  return s;
}

std::span<const float> values_of(const FloatArray& a) { return {a.data(), a.size()}; }

// A copy of the array as a Tensor (set_weights keeps it).
Tensor tensor_of(const FloatArray& a) { return Tensor(shape_of(a), values_of(a)); }

// The array itself as a Tensor, not a copy, for the library to read during one call (fit's
// validation data, evaluate, predict): the caller's ndarray argument keeps it alive meanwhile.
Tensor view_of(const FloatArray& a) { return Tensor::view(shape_of(a), values_of(a)); }

// A numpy array owning a copy of t.
NumpyArray to_numpy(const Tensor& t) {
  auto* data = new float[static_cast<std::size_t>(t.size())];
  if (t.size() > 0) std::memcpy(data, t.data(), static_cast<std::size_t>(t.size()) * sizeof(float));
  nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<float*>(p); });
  std::vector<std::size_t> shape(t.shape().begin(), t.shape().end());
  return NumpyArray(data, shape.size(), shape.data(), owner);
}

// A numpy array over t's own values, not a copy: the array keeps t alive. For a tensor that owns
// its values (not Tensor::view's), such as the engine's results: weights, outputs, gradients.
NumpyArray to_numpy_owning(Tensor&& t) {
  if (t.size() == 0) return to_numpy(t);
  auto* held = new Tensor(std::move(t));
  nb::capsule owner(held, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<std::size_t> shape(held->shape().begin(), held->shape().end());
  return NumpyArray(held->data(), shape.size(), shape.data(), owner);
}

nb::dict history_to_python(const History& h) {
  nb::dict d;
  nb::dict values;
  for (const auto& [key, v] : h.history) values[key.c_str()] = nb::cast(v);
  nb::list epochs;
  for (const EpochRecord& r : h.epochs) epochs.append(r.epoch - 1);
  d["history"] = values;
  d["epoch"] = epochs;
  d["interrupted"] = h.interrupted;
  d["stopped_early"] = h.stopped_early;
  return d;
}

}  // namespace

void bind_api(nb::module_& m);    // _core_api.cpp
void bind_optim(nb::module_& m);  // _core_optim.cpp
void bind_files(nb::module_& m);  // _core_files.cpp

namespace {

// keras.layers: the engine's Layer; its arguments are read back as its Keras config.
void bind_layer_class(nb::module_& m) {
  nb::class_<Layer>(m, "Layer")
      .def_rw("name", &Layer::name)
      .def_prop_ro("type", [](const Layer& l) { return std::string(layer_type_name(l.type)); })
      // Settable: a functional model's layer other than its input ignores a declared
      // input_shape, as Keras does (keras/functional.py clears it).
      .def_rw("input_shape", &Layer::input_shape)
      // Keras's dtype policy name ("float32", "mixed_bfloat16"): what a model file says.
      .def_prop_rw(
          "dtype_policy",
          [](const Layer& l) { return std::string(dtype_policy_name(l.dtype_policy)); },
          [](Layer& l, const std::string& name) {
            l.dtype_policy = parse_dtype_policy(name, "dtype");
          })
      // Keras's trainable (Layer::trainable): written to and read from model files.
      .def_rw("trainable", &Layer::trainable)
      // Its Keras 3 config (JSON text) as model files write it, every default spelled out:
      // keras.layers.<type>.from_config rebuilds the Python layer from it.
      .def("keras_config", &layer_config_to_json);
}

// keras.layers' engine layers, and keras.initializers' values.
void bind_layer_constructors(nb::module_& m) {
  // keras.initializers' __call__: the values of an initializer (Keras 3 JSON text) for a shape,
  // drawn from crossover's Philox stream under `seed`.
  m.def(
      "initial_values",
      [](std::string_view text, const Shape& shape, uint64_t seed) {
        const Initializer init = initializer_from_keras_json(text, "initializer");
        Tensor t(shape);
        initial_values(init, shape, {seed, 0, 0}, {t.data(), static_cast<std::size_t>(t.size())});
        return to_numpy(t);
      },
      nb::arg("initializer"), nb::arg("shape"), nb::arg("seed") = 0);
  // Every kind of keras.layers, made through the registry from its Keras class name and config
  // (JSON text), as a model file's layer is read: no kind has a binding of its own.
  m.def("layer_from_config", &layer_from_config, nb::arg("class_name"), nb::arg("config"));
}

// The ops of a custom layer's call() traced, and the registry of layer kinds.
void bind_traced_ops_and_registry(nb::module_& m) {
  // The ops of a custom layer's call(), traced (keras/ops.py): op names as binary_op_name.
  m.def(
      "BinaryOp", [](std::string_view op) { return BinaryOpLayer(parse_binary_op(op)); },
      nb::arg("op"));
  m.def(
      "ConstantOp",
      [](std::string_view op, double constant, bool constant_first) {
        return ConstantOp(parse_binary_op(op), constant, constant_first);
      },
      nb::arg("op"), nb::arg("constant"), nb::arg("constant_first") = false);
  // Its weight drawn by `initializer` (Keras 3's serialization, JSON text), as add_weight's, and
  // regularized by `regularizer` (JSON text: null, or a serialized L1, L2, L1L2).
  m.def(
      "WeightOp",
      [](std::string_view op, Shape shape, std::string name, std::string_view initializer,
         bool trainable, bool weight_first, std::string_view regularizer) {
        Layer l = WeightOp(parse_binary_op(op), std::move(shape),
                           initializer_from_keras_json(initializer, "initializer"), std::move(name),
                           trainable, weight_first);
        l.args<UnaryOpArgs>().regularizer =
            keras_config::regularizer_from_keras_json(regularizer, "add_weight");
        return l;
      },
      nb::arg("op"), nb::arg("shape"), nb::arg("name"), nb::arg("initializer"),
      nb::arg("trainable") = true, nb::arg("weight_first") = false,
      nb::arg("regularizer") = "null");
  m.def("Reduce", &ReduceLastAxis, nb::arg("mean"));
  m.def("AddLoss", &AddLoss, nb::arg("scale"), nb::arg("mean"));
  m.def("Sqrt", &Sqrt);
  // x . w for a custom layer's weight w (inputs, units): a Dense without bias whose kernel is
  // named and drawn as add_weight named and drew it.
  m.def(
      "MatMul",
      [](int64_t units, std::string name, std::string_view initializer, bool trainable,
         std::string_view regularizer) {
        Layer l = Dense(units, "linear", false);
        DenseArgs& a = l.args<DenseArgs>();
        a.weight_name = std::move(name);
        a.kernel_initializer = initializer_from_keras_json(initializer, "initializer");
        a.weight_trainable = trainable;
        a.kernel_regularizer = keras_config::regularizer_from_keras_json(regularizer, "add_weight");
        return l;
      },
      nb::arg("units"), nb::arg("name"), nb::arg("initializer"), nb::arg("trainable") = true,
      nb::arg("regularizer") = "null");
  // A layer built alone on per-sample input shapes (nn/layers/kind.h): its output shape and its
  // parameters (name, shape, trainable), for the symbolic calls and summary() of keras.layers.
  m.def("build_layer", [](const Layer& layer, const std::vector<Shape>& in_shapes) {
    BuiltLayer built = build_layer(layer, in_shapes);
    std::vector<std::tuple<std::string, Shape, bool>> params;
    for (const LayerParam& p : built.params) params.emplace_back(p.name, p.shape, p.trainable);
    return std::make_pair(built.out_shape, params);
  });
  // The registry of layer kinds (nn/layers/registry.cpp), in LayerType order: what
  // tests/python/test_layer_registry.py checks crossover.keras.layers against.
  m.def("layer_kinds", [] {
    nb::list kinds;
    for (const LayerKind* k : layer_kinds()) {
      nb::dict d;
      d["class_name"] = std::string(k->class_name());
      nb::list aliases;
      for (std::string_view a : k->aliases()) aliases.append(std::string(a));
      d["aliases"] = aliases;
      d["cli_name"] = std::string(k->cli_name());
      d["takes_images"] = k->takes_images();
      d["is_model_input"] = k->is_model_input();
      d["merges"] = k->merges();
      d["declares_input"] = k->declares_input();
      // Its Keras class's own arguments in __init__'s order (LayerKind::keras_arguments):
      // (name, default as JSON text, required, keyword only); None where Python makes the class
      // otherwise (keras.Input, the traced ops).
      if (const std::optional<keras_config::Arguments> args = k->keras_arguments()) {
        nb::list list;
        for (const keras_config::Argument& a : *args)
          list.append(nb::make_tuple(a.name, a.value.dump(), a.required, a.keyword));
        d["arguments"] = list;
      } else {
        d["arguments"] = nb::none();
      }
      kinds.append(d);
    }
    return kinds;
  });
}

const char* argument_type(OptimizerArgumentValue::Type t) {
  switch (t) {
    case OptimizerArgumentValue::Type::number:
      return "number";
    case OptimizerArgumentValue::Type::float32:
      return "float32";
    case OptimizerArgumentValue::Type::flag:
      return "flag";
    case OptimizerArgumentValue::Type::refused:
      break;
  }
  return "refused";
}

// The optimizers (crossover.keras.optimizers makes its classes from optimizer_classes).
void bind_optimizer_constructors(nb::module_& m) {
  nb::class_<OptimizerConfig>(m, "Optimizer")
      .def_prop_ro("name", [](const OptimizerConfig& o) { return optimizer_name(o.kind); })
      // Its own arguments by Keras name, as it holds them (flags as bool).
      .def_prop_ro("arguments",
                   [](const OptimizerConfig& o) {
                     nb::dict d;
                     for (const OptimizerArgumentValue& a : optimizer_arguments(o)) {
                       const std::string key(a.name);
                       if (a.type == OptimizerArgumentValue::Type::flag ||
                           a.type == OptimizerArgumentValue::Type::refused)
                         d[key.c_str()] = a.value != 0;
                       else
                         d[key.c_str()] = a.value;
                     }
                     return d;
                   })
      .def_prop_ro("amsgrad", [](const OptimizerConfig& o) { return optimizer_third_slot(o); })
      .def_prop_ro("slot_count", &optimizer_slot_count)
      .def_prop_ro("carries_value", &optimizer_carries_value);
  m.def("optimizer_from_name", &optimizer_from_name, nb::arg("name"));
  m.def("with_tensor_clipnorm", &with_tensor_clipnorm, nb::arg("optimizer"), nb::arg("clipnorm"));
  // Any optimizer by Keras's class name and arguments (crossover.keras.optimizers builds each
  // class from optimizer_classes).
  m.def(
      "make_optimizer",
      [](const std::string& class_name, const OptimizerArgumentValues& arguments) {
        return make_optimizer(class_name, arguments);
      },
      nb::arg("class_name"), nb::arg("arguments"));
  // Each loss unit's rules (backends/losses/unit.h), for crossover.keras.losses and metrics.
  m.def("loss_rules", [] {
    nb::list out;
    for (const LossKind kind : all_loss_kinds()) {
      const losses::LossRules& r = loss_rules(kind);
      nb::dict d;
      d["name"] = std::string(r.name);
      d["class_name"] = std::string(r.class_name);
      d["alias"] = std::string(r.alias);
      d["class_index_targets"] = r.class_index_targets;
      d["classes_on_last_axis"] = r.classes_on_last_axis;
      d["elementwise"] = r.elementwise;
      d["from_logits"] = r.logits != ActivationKind::linear;
      d["parameter"] = std::string(r.parameter);
      d["parameter_default"] = r.parameter_default;
      out.append(d);
    }
    return out;
  });
  // Why a value cannot be a loss's one argument (Huber's delta), or "": the engine's rule, which
  // keras.losses' classes ask when they are made, as Keras checks.
  m.def("loss_parameter_problem", [](const std::string& name, double value) {
    const std::optional<LossKind> kind = find_loss(name);
    if (!kind) throw Error("loss_parameter_problem", "unknown loss '" + name + "'");
    return loss_parameter_problem(loss_rules(*kind), value);
  });
  // Each Keras optimizer class the engine has: its name, default name, learning rate and weight
  // decay defaults, and its own arguments [(name, default, type)] in Keras's order, type one of
  // "number", "float32", "flag", "refused".
  m.def("optimizer_classes", [] {
    nb::list out;
    for (const OptimizerClass& c : optimizer_classes()) {
      nb::list args;
      for (const OptimizerArgumentValue& a : c.arguments)
        args.append(nb::make_tuple(std::string(a.name), a.default_value, argument_type(a.type)));
      nb::dict d;
      d["class_name"] = c.class_name;
      d["name"] = c.default_name;
      d["alias_of"] = c.alias_of;
      d["learning_rate"] = c.learning_rate;
      d["weight_decay"] = c.weight_decay;
      d["arguments"] = args;
      out.append(d);
    }
    return out;
  });
}

// Sequential's fit (Keras's arguments as crossover.keras passes them).
void bind_sequential_fit(nb::class_<Sequential>& sequential) {
  sequential.def(
      "fit",
      [](Sequential& s, FloatArray x, FloatArray y, int epochs, int64_t batch_size, bool shuffle,
         double validation_split, std::optional<FloatArray> val_x, std::optional<FloatArray> val_y,
         int verbose, int initial_epoch, nb::object callbacks, bool redraw,
         std::optional<int64_t> steps_per_epoch, std::optional<int64_t> validation_steps,
         int validation_freq, std::string metric_name, std::optional<FloatArray> sample_weight,
         std::map<int64_t, double> class_weight, std::optional<FloatArray> val_weight) {
        FitOptions o;
        o.epochs = epochs;
        o.batch_size = batch_size;
        o.shuffle = shuffle;
        o.validation_split = validation_split;
        o.verbose = verbose;
        o.initial_epoch = initial_epoch;
        o.steps_per_epoch = steps_per_epoch;
        o.validation_steps = validation_steps;
        o.validation_freq = validation_freq;
        o.metric_name = std::move(metric_name);
        // Text goes to Python's sys.stdout; callbacks (a keras CallbackList) are called
        // between epochs, both taking the GIL.
        o.output = python_stdout();
        o.redraw = redraw;
        // A second Ctrl-C goes to Python's handler: KeyboardInterrupt, not the end of Python.
        o.second_interrupt_ends_process = false;
        if (!callbacks.is_none()) o.callbacks.push_back(python_callbacks(callbacks));
        Tensor vx, vy;
        if (val_x && val_y) {
          vx = view_of(*val_x);
          vy = view_of(*val_y);
          o.validation_x = &vx;
          o.validation_y = &vy;
        }
        Tensor w, vw;
        if (sample_weight) {
          w = view_of(*sample_weight);
          o.sample_weight = &w;
        }
        if (val_weight) {
          vw = view_of(*val_weight);
          o.validation_sample_weight = &vw;
        }
        o.class_weight = std::move(class_weight);
        History h;
        {
          // The loop is C++ only: other Python threads run meanwhile.
          nb::gil_scoped_release release;
          h = s.fit(values_of(x), shape_of(x), values_of(y), shape_of(y), std::move(o));
        }
        return history_to_python(h);
      },
      nb::arg("x"), nb::arg("y"), nb::arg("epochs"), nb::arg("batch_size"), nb::arg("shuffle"),
      nb::arg("validation_split"), nb::arg("validation_x").none(), nb::arg("validation_y").none(),
      nb::arg("verbose"), nb::arg("initial_epoch"), nb::arg("callbacks").none(), nb::arg("redraw"),
      nb::arg("steps_per_epoch").none() = nb::none(),
      nb::arg("validation_steps").none() = nb::none(), nb::arg("validation_freq") = 1,
      nb::arg("metric_name") = "accuracy", nb::arg("sample_weight").none() = nb::none(),
      nb::arg("class_weight") = std::map<int64_t, double>{},
      nb::arg("validation_sample_weight").none() = nb::none());
}

// Sequential's compile, evaluate and predict (fit: bind_sequential_fit).
// A loss argument Python did not give: the loss's Keras default (LossSpec::parameter).
constexpr double kNoParameter = std::numeric_limits<double>::quiet_NaN();

// Sequential's compile with one loss, and with a loss per output.
void bind_sequential_compile(nb::class_<Sequential>& sequential) {
  sequential
      .def(
          "compile",
          [](Sequential& s, const OptimizerConfig& opt, const std::string& loss,
             std::vector<std::string> metrics, const std::string& device, int threads,
             uint64_t seed, const std::string& precision, bool from_logits,
             std::vector<std::string> metric_names,
             std::vector<std::optional<double>> metric_parameters,
             std::optional<double> loss_parameter) {
            CompileOptions o;
            o.device = device;
            o.threads = threads;
            o.seed = seed;
            o.precision = precision;
            // Each metric by a Keras name, reported under metric_names' (when given), with its
            // class's k or threshold from metric_parameters (None: the class's default).
            std::vector<MetricSpec> specs;
            for (std::size_t i = 0; i < metrics.size(); ++i) {
              specs.push_back(metric_spec(metrics[i]));
              if (i < metric_names.size()) specs.back().name = metric_names[i];
              if (i < metric_parameters.size() && metric_parameters[i])
                set_metric_parameter(specs.back(), *metric_parameters[i], "compile");
            }
            s.compile_with(opt, LossSpec{loss, from_logits, loss_parameter.value_or(kNoParameter)},
                           std::move(specs), o);
          },
          nb::arg("optimizer"), nb::arg("loss"), nb::arg("metrics"), nb::arg("device") = "cpu",
          nb::arg("threads") = 0, nb::arg("seed") = 0, nb::arg("precision") = "",
          nb::arg("from_logits") = false, nb::arg("metric_names") = std::vector<std::string>{},
          nb::arg("metric_parameters") = std::vector<std::optional<double>>{},
          nb::arg("loss_parameter") = std::nullopt)
      .def(
          "compile_outputs",
          // A loss per output (Sequential::compile_outputs): losses[j], from_logits[j],
          // weights[j], and its metrics by Keras name, reported under metric_names[j].
          [](Sequential& s, const OptimizerConfig& opt, std::vector<std::string> losses,
             std::vector<bool> from_logits, std::vector<double> weights,
             std::vector<std::vector<std::string>> metrics,
             std::vector<std::vector<std::string>> metric_names,
             std::vector<std::vector<std::optional<double>>> metric_parameters,
             const std::string& device, int threads, uint64_t seed, const std::string& precision,
             std::vector<std::optional<double>> loss_parameters) {
            CompileOptions o;
            o.device = device;
            o.threads = threads;
            o.seed = seed;
            o.precision = precision;
            std::vector<OutputLoss> outputs;
            for (std::size_t j = 0; j < losses.size(); ++j) {
              OutputLoss out;
              out.loss = LossSpec{losses[j], j < from_logits.size() && from_logits[j]};
              if (j < loss_parameters.size() && loss_parameters[j])
                out.loss.parameter = *loss_parameters[j];
              if (j < weights.size()) out.weight = weights[j];
              const std::vector<std::string> none;
              const auto& kinds = j < metrics.size() ? metrics[j] : none;
              for (std::size_t i = 0; i < kinds.size(); ++i) {
                out.metrics.push_back(metric_spec(kinds[i]));
                if (j < metric_names.size() && i < metric_names[j].size())
                  out.metrics.back().name = metric_names[j][i];
                if (j < metric_parameters.size() && i < metric_parameters[j].size() &&
                    metric_parameters[j][i])
                  set_metric_parameter(out.metrics.back(), *metric_parameters[j][i], "compile");
              }
              outputs.push_back(std::move(out));
            }
            s.compile_outputs(opt, std::move(outputs), o);
          },
          nb::arg("optimizer"), nb::arg("losses"), nb::arg("from_logits"), nb::arg("weights"),
          nb::arg("metrics"), nb::arg("metric_names"), nb::arg("metric_parameters"),
          nb::arg("device") = "cpu", nb::arg("threads") = 0, nb::arg("seed") = 0,
          nb::arg("precision") = "",
          nb::arg("loss_parameters") = std::vector<std::optional<double>>{});
}

void bind_sequential_training(nb::class_<Sequential>& sequential) {
  sequential
      .def(
          "use_measured_cpu_threads",
          [](Sequential& s, FloatArray x, FloatArray y, int64_t batch_size, uint64_t seed,
             bool say) -> std::optional<std::pair<int, std::string>> {
            // The CLI's --threads 0 (perf::cpu_threads_for_model): the count that trains this
            // model fastest here, measured on copies of it (or saved by an earlier run, the
            // CLI's too); then the model is compiled again at that count, keeping its weights
            // and optimizer state. Data the library refuses: nothing measured (std::nullopt),
            // and fit reports it.
            const Tensor tx = view_of(x), ty = view_of(y);
            perf::ThreadsForRun r;
            try {
              std::function<void(const std::string&)> sink;
              if (say)
                sink = [](const std::string& line) { python_stderr_line("threads: " + line); };
              nb::gil_scoped_release release;
              r = perf::cpu_threads_for_model(
                  s, tx, ty, batch_size, seed, sink,
                  "tf.config.threading.set_intra_op_parallelism_threads(N) or CROSSOVER_THREADS=N");
            } catch (const Error&) {
              return std::nullopt;
            }
            const bool built = !s.input_shape().empty();
            std::vector<NamedTensor> weights, state;
            int64_t steps = 0;
            if (built) {
              weights = s.get_weights();
              state = s.get_optimizer_state();
              steps = s.optimizer_steps();
            }
            const OptimizerConfig optimizer = s.optimizer();
            const LossSpec loss{s.loss_name(), s.from_logits(), s.loss_parameter()};
            const std::vector<MetricSpec> metrics = s.metric_specs();  // copied: compile resets
            s.compile_with(
                optimizer, loss, metrics,
                {.device = "cpu", .threads = r.threads, .seed = seed, .precision = s.precision()});
            if (built) {
              s.set_weights(weights);
              s.set_optimizer_state(state);
              s.set_optimizer_steps(steps);
            }
            return std::make_pair(r.threads, r.chosen_by);
          },
          nb::arg("x"), nb::arg("y"), nb::arg("batch_size"), nb::arg("seed"), nb::arg("say"))
      .def(
          "evaluate",
          [](Sequential& s, FloatArray x, FloatArray y, int64_t batch_size, int verbose,
             nb::object callbacks, std::string metric_name,
             std::optional<FloatArray> sample_weight) {
            const Tensor tx = view_of(x), ty = view_of(y);
            EvaluateOptions o{batch_size, verbose, python_stdout(), {}, std::move(metric_name),
                              nullptr};
            Tensor w;
            if (sample_weight) {
              w = view_of(*sample_weight);
              o.sample_weight = &w;
            }
            if (!callbacks.is_none()) o.callbacks.push_back(python_callbacks(callbacks));
            nb::gil_scoped_release release;
            const EvaluateResult r = s.evaluate(tx, ty, std::move(o));
            return std::make_tuple(r.loss, r.accuracy, r.metrics);
          },
          nb::arg("x"), nb::arg("y"), nb::arg("batch_size"), nb::arg("verbose"),
          nb::arg("callbacks").none() = nb::none(), nb::arg("metric_name") = "accuracy",
          nb::arg("sample_weight").none() = nb::none())
      .def(
          "predict",
          [](Sequential& s, FloatArray x, int64_t batch_size, nb::object callbacks) {
            const Tensor tx = view_of(x);
            Callbacks cbs;
            if (!callbacks.is_none()) cbs.push_back(python_callbacks(callbacks));
            Tensor out;
            {
              nb::gil_scoped_release release;
              out = s.predict(tx, batch_size, cbs);
            }
            return to_numpy(out);
          },
          nb::arg("x"), nb::arg("batch_size"), nb::arg("callbacks").none() = nb::none());
}

// Sequential's description, state and weights.
void bind_sequential_state(nb::class_<Sequential>& sequential) {
  sequential.def("summary", &Sequential::summary)
      .def("count_params", &Sequential::count_params)
      .def("trainable_params", &Sequential::trainable_params)
      // Keras's layer.trainable for the layer at an index of layers: in fit from the next compile.
      .def("set_trainable", &Sequential::set_trainable, nb::arg("layer"), nb::arg("trainable"))
      .def_prop_ro("compiled", &Sequential::compiled)
      .def_prop_ro("name", &Sequential::name)
      .def_prop_ro("input_shape", &Sequential::input_shape)
      .def_prop_ro("device_name", &Sequential::device_name)
      .def_prop_ro("precision", &Sequential::precision)
      .def_prop_ro("layers", &Sequential::layers)
      // The one policy of the Dense and Conv2D layers (model_dtype_policy; ValueError naming two
      // that differ), and the engine's precision for it.
      .def_prop_ro("dtype_policy",
                   [](const Sequential& s) {
                     return std::string(dtype_policy_name(model_dtype_policy(s.layers())));
                   })
      .def("metrics", &Sequential::metrics)
      // For callbacks.
      .def("stop_training", &Sequential::stop_training)
      .def_prop_ro("optimizer_steps", &Sequential::optimizer_steps)
      .def_prop_ro("optimizer", [](const Sequential& s) { return s.optimizer(); })
      // The names of the optimizer's state tensors the engine holds ("dense/kernel/slot1", ...,
      // "optimizer/step"): which slots it keeps per weight.
      .def("optimizer_state_names",
           [](const Sequential& s) {
             std::vector<std::string> names;
             for (const NamedTensor& t : s.get_optimizer_state()) names.push_back(t.name);
             return names;
           })
      .def_prop_ro("learning_rate", &Sequential::learning_rate)
      .def("set_learning_rate", &Sequential::set_learning_rate, nb::arg("learning_rate"))
      .def("get_weights",
           [](const Sequential& s) {
             std::vector<std::pair<std::string, NumpyArray>> out;
             for (NamedTensor& w : s.get_weights())
               out.emplace_back(w.name, to_numpy_owning(std::move(w.value)));
             return out;
           })
      .def(
          "set_weights",
          [](Sequential& s, const std::vector<std::pair<std::string, FloatArray>>& weights) {
            std::vector<NamedTensor> named;
            for (const auto& [name, a] : weights) named.push_back({name, tensor_of(a)});
            s.set_weights(named);
          },
          nb::arg("weights"))
      // A custom training loop's step in three calls (Sequential::training_forward, ...): the
      // tape's model(x, training=True), its loss and gradients, the optimizer's update.
      .def(
          "training_forward",
          [](Sequential& s, FloatArray x) {
            const Tensor tx = view_of(x);
            Tensor out;
            {
              nb::gil_scoped_release release;
              out = s.training_forward(tx);
            }
            return to_numpy_owning(std::move(out));
          },
          nb::arg("x"))
      .def(
          "training_backward",
          [](Sequential& s, FloatArray y, std::string loss, bool from_logits,
             std::optional<double> loss_parameter) {
            const Tensor ty = view_of(y);
            Sequential::TrainingGradients g;
            {
              nb::gil_scoped_release release;
              g = s.training_backward(ty, LossSpec{std::move(loss), from_logits,
                                                   loss_parameter.value_or(kNoParameter)});
            }
            std::vector<std::pair<std::string, NumpyArray>> grads;
            for (NamedTensor& t : g.gradients)
              grads.emplace_back(t.name, to_numpy_owning(std::move(t.value)));
            return std::make_pair(g.loss, grads);
          },
          nb::arg("y"), nb::arg("loss"), nb::arg("from_logits"),
          nb::arg("loss_parameter") = std::nullopt)
      .def(
          "training_backward_outputs",
          [](Sequential& s, FloatArray output_gradient) {
            const Tensor g = view_of(output_gradient);
            std::vector<NamedTensor> named;
            {
              nb::gil_scoped_release release;
              named = s.training_backward_outputs(g);
            }
            std::vector<std::pair<std::string, NumpyArray>> grads;
            for (NamedTensor& t : named)
              grads.emplace_back(t.name, to_numpy_owning(std::move(t.value)));
            return grads;
          },
          nb::arg("output_gradient"))
      .def("trainable_gradient_names", &Sequential::trainable_gradient_names)
      .def(
          "apply_gradients",
          [](Sequential& s, const std::vector<std::pair<std::string, FloatArray>>& gradients) {
            std::vector<NamedTensor> named;
            for (const auto& [name, a] : gradients) named.push_back({name, view_of(a)});
            nb::gil_scoped_release release;
            s.apply_gradients(named);
          },
          nb::arg("gradients"))
      .def("use_optimizer", &Sequential::use_optimizer, nb::arg("optimizer"));
}

// fit's progress line (nn/progress.h) for the epochs a Python loop runs: a model's own
// train_step (keras/models.py), one line per epoch, or redrawn in place when `interactive`.
void bind_progress(nb::module_& m) {
  nb::class_<ProgressBar>(m, "ProgressBar")
      .def(
          "__init__",
          [](ProgressBar* bar, int64_t total_steps, bool interactive) {
            new (bar) ProgressBar(python_stdout(), total_steps, interactive);
          },
          nb::arg("total_steps"), nb::arg("interactive"))
      .def("due", [](const ProgressBar& bar) { return bar.due(std::chrono::steady_clock::now()); })
      .def(
          "update",
          [](ProgressBar& bar, int64_t step,
             const std::vector<std::pair<std::string, double>>& values) {
            bar.update(step, values, std::chrono::steady_clock::now());
          },
          nb::arg("step"), nb::arg("values"))
      .def("finish", &ProgressBar::finish, nb::arg("steps"), nb::arg("seconds"), nb::arg("values"));
}

void bind_dtype_policies(nb::module_& m) {
  // Keras dtype policies: "" when the engine trains in one, else why not (nn/layers.h); the
  // engine's precision for one it has.
  m.def(
      "dtype_policy_problem", [](const std::string& name) { return dtype_policy_problem(name); },
      nb::arg("name"));
  m.def(
      "dtype_policy_precision",
      [](const std::string& name) {
        return std::string(
            precision_name(dtype_policy_precision(parse_dtype_policy(name, "dtype"))));
      },
      nb::arg("name"));
  // "" when the CPU can train in `precision` ("fp32", "bf16"), else why not (the engine's line).
  m.def(
      "cpu_precision_problem",
      [](const std::string& precision) {
        return cpu_precision_problem(parse_precision(precision, "precision"));
      },
      nb::arg("precision"));
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "crossover's C++ engine (use crossover.keras)";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  bind_layer_class(m);
  bind_layer_constructors(m);
  bind_traced_ops_and_registry(m);
  bind_optimizer_constructors(m);
  crossover_python::bind_callbacks(m);
  nb::class_<Sequential> sequential(m, "Sequential");
  sequential
      .def(nb::init<std::vector<Layer>, std::string>(), nb::arg("layers"),
           nb::arg("name") = "sequential")
      // A functional model: layer i reads the outputs of the layers inputs[i] lists; the
      // model's inputs are the InputLayers input_layers lists (empty: all, in order); a layer
      // called again is the earlier entry shared_with names (LayerGraph::shared_with).
      .def(
          "__init__",
          [](Sequential* s, std::vector<Layer> layers, std::vector<std::vector<int>> inputs,
             std::string name, std::vector<int> input_layers, std::vector<int> output_layers,
             std::vector<int> shared_with) {
            new (s)
                Sequential(LayerGraph{std::move(layers), std::move(inputs), std::move(input_layers),
                                      std::move(output_layers), std::move(shared_with)},
                           std::move(name));
          },
          nb::arg("layers"), nb::arg("inputs"), nb::arg("name") = "functional",
          nb::arg("input_layers") = std::vector<int>{},
          nb::arg("output_layers") = std::vector<int>{},
          nb::arg("shared_with") = std::vector<int>{})
      .def_prop_ro("functional", &Sequential::functional)
      .def_prop_ro("layer_shared_with", &Sequential::layer_shared_with)
      .def_prop_ro("input_layers", &Sequential::input_layers)
      .def_prop_ro("output_layers", &Sequential::output_layers)
      .def_prop_ro("layer_inputs", &Sequential::layer_inputs);
  bind_sequential_compile(sequential);
  bind_sequential_training(sequential);
  bind_sequential_fit(sequential);
  bind_sequential_state(sequential);
  bind_dtype_policies(m);
  bind_progress(m);
  bind_api(m);
  bind_optim(m);
  bind_files(m);
}
