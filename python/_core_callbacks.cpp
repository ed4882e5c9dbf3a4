// crossover._core: fit's callbacks and text output (see _core_callbacks.h).
//
// Keras's callbacks are the library's (nn/callbacks.h): crossover/keras/callbacks.py gives them
// Keras's names and arguments and calls their hooks; a user's Python Callback is reached through
// python_callbacks(), the only library callback fit is given from Python.
#include "_core_callbacks.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace nb = nanobind;
using namespace crossover;

namespace crossover_python {
namespace {

nb::dict to_dict(const Logs& logs) {
  nb::dict d;
  for (const auto& [key, value] : logs) d[key.c_str()] = value;
  return d;
}

// A numpy array owning a copy of t (a batch's predictions, which the library reuses).
nb::object numpy_copy(const Tensor& t) {
  auto* data = new float[static_cast<std::size_t>(t.size())];
  if (t.size() > 0) std::memcpy(data, t.data(), static_cast<std::size_t>(t.size()) * sizeof(float));
  nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<float*>(p); });
  std::vector<std::size_t> shape(t.shape().begin(), t.shape().end());
  return nb::cast(nb::ndarray<nb::numpy, float>(data, shape.size(), shape.data(), owner));
}

const char* phase_name(BatchPhase phase) {
  switch (phase) {
    case BatchPhase::train:
      return "train";
    case BatchPhase::test:
      return "test";
    case BatchPhase::predict:
      return "predict";
  }
  return "";
}

// Every hook goes to the Python CallbackList, the batch hooks only for the phases in which a
// Python callback overrides one (CallbackList.wants_batches), so that a list without any costs
// fit nothing per batch.
class PythonCallbacks final : public Callback {
 public:
  explicit PythonCallbacks(nb::object list) : list_(std::move(list)) {}
  ~PythonCallbacks() override {
    nb::gil_scoped_acquire gil;
    list_.reset();
  }
  void on_train_begin(Sequential&) override {
    nb::gil_scoped_acquire gil;
    list_.attr("on_train_begin")();
  }
  void on_epoch_begin(Sequential&, int epoch) override {
    nb::gil_scoped_acquire gil;
    list_.attr("on_epoch_begin")(epoch);
  }
  void on_epoch_end(Sequential&, int epoch, const Logs& logs) override {
    nb::gil_scoped_acquire gil;
    list_.attr("on_epoch_end")(epoch, to_dict(logs));
  }
  void on_train_end(Sequential&) override {
    nb::gil_scoped_acquire gil;
    list_.attr("on_train_end")();
  }
  bool wants_batches(BatchPhase phase) const override {
    nb::gil_scoped_acquire gil;
    return nb::cast<bool>(list_.attr("wants_batches")(phase_name(phase)));
  }
  void on_train_batch_begin(Sequential&, int64_t batch) override {
    call("on_train_batch_begin", batch);
  }
  void on_train_batch_end(Sequential&, int64_t batch, const Logs& logs) override {
    nb::gil_scoped_acquire gil;
    list_.attr("on_train_batch_end")(batch, to_dict(logs));
  }
  void on_test_begin(Sequential&) override {
    nb::gil_scoped_acquire gil;
    list_.attr("on_test_begin")();
  }
  void on_test_end(Sequential&, const Logs& logs) override {
    nb::gil_scoped_acquire gil;
    list_.attr("on_test_end")(to_dict(logs));
  }
  void on_test_batch_begin(Sequential&, int64_t batch) override {
    call("on_test_batch_begin", batch);
  }
  void on_test_batch_end(Sequential&, int64_t batch, const Logs& logs) override {
    nb::gil_scoped_acquire gil;
    list_.attr("on_test_batch_end")(batch, to_dict(logs));
  }
  void on_predict_begin(Sequential&) override {
    nb::gil_scoped_acquire gil;
    list_.attr("on_predict_begin")();
  }
  void on_predict_end(Sequential&) override {
    nb::gil_scoped_acquire gil;
    list_.attr("on_predict_end")();
  }
  void on_predict_batch_begin(Sequential&, int64_t batch) override {
    call("on_predict_batch_begin", batch);
  }
  void on_predict_batch_end(Sequential&, int64_t batch, const Tensor& outputs) override {
    nb::gil_scoped_acquire gil;
    nb::dict logs;
    logs["outputs"] = numpy_copy(outputs);
    list_.attr("on_predict_batch_end")(batch, logs);
  }

 private:
  void call(const char* hook, int64_t batch) {
    nb::gil_scoped_acquire gil;
    list_.attr(hook)(batch);
  }
  nb::object list_;
};

// The weight files ModelCheckpoint writes, by the path's suffix: the library's save_weights picks
// the writer by the same suffix (weights_format_of).
using Saver = std::function<void(const Sequential&, const std::string&)>;
const std::vector<std::pair<std::string, Saver>>& savers() {
  static const Saver save = [](const Sequential& m, const std::string& p) { save_weights(m, p); };
  static const std::vector<std::pair<std::string, Saver>> s = {{".weights.h5", save},
                                                               {".safetensors", save}};
  return s;
}

Saver saver_for(const std::string& path) {
  for (const auto& [suffix, save] : savers())
    if (path.size() >= suffix.size() && path.ends_with(suffix)) return save;
  std::string known;
  for (const auto& [suffix, save] : savers()) known += (known.empty() ? "" : ", ") + suffix;
  throw Error("ModelCheckpoint", "cannot write '" + path + "': the path must end in " + known);
}

// Keras's io_utils.print_msg for a callback's verbose messages: the line and a newline to
// sys.stdout; none without verbose.
CallbackMessages messages(bool verbose) {
  if (!verbose) return {};
  return [out = python_stdout()](const std::string& line) { out(line + "\n"); };
}

}  // namespace

std::shared_ptr<Callback> python_callbacks(nb::object callback_list) {
  return std::make_shared<PythonCallbacks>(std::move(callback_list));
}

TextSink python_stdout() {
  return [](std::string_view text) {
    nb::gil_scoped_acquire gil;
    nb::object out = nb::module_::import_("sys").attr("stdout");
    if (out.is_none()) return;  // pythonw: no console
    out.attr("write")(nb::str(text.data(), text.size()));
    out.attr("flush")();
  };
}

void python_stderr_line(const std::string& line) {
  nb::gil_scoped_acquire gil;
  nb::object err = nb::module_::import_("sys").attr("stderr");
  if (err.is_none()) return;
  err.attr("write")(nb::str((line + "\n").c_str()));
  err.attr("flush")();
}

void bind_callbacks(nb::module_& m) {
  // The library's callbacks, called by crossover/keras/callbacks.py with the library's model.
  nb::class_<Callback>(m, "Callback")
      .def("on_train_begin", &Callback::on_train_begin, nb::arg("model"))
      .def("on_epoch_begin", &Callback::on_epoch_begin, nb::arg("model"), nb::arg("epoch"))
      .def("on_epoch_end", &Callback::on_epoch_end, nb::arg("model"), nb::arg("epoch"),
           nb::arg("logs"))
      .def("on_train_end", &Callback::on_train_end, nb::arg("model"))
      .def("on_train_batch_end", &Callback::on_train_batch_end, nb::arg("model"), nb::arg("batch"),
           nb::arg("logs"))
      .def(
          "wants_batches",
          [](const Callback& cb, const std::string& phase) {
            if (phase == "train") return cb.wants_batches(BatchPhase::train);
            if (phase == "test") return cb.wants_batches(BatchPhase::test);
            return cb.wants_batches(BatchPhase::predict);
          },
          nb::arg("phase"));

  m.def(
      "EarlyStopping",
      [](std::string monitor, double min_delta, int patience, std::string mode,
         std::optional<double> baseline, bool restore_best_weights, int start_from_epoch,
         bool verbose) {
        return EarlyStopping({std::move(monitor), min_delta, patience, std::move(mode), baseline,
                              restore_best_weights, start_from_epoch, messages(verbose)});
      },
      nb::arg("monitor"), nb::arg("min_delta"), nb::arg("patience"), nb::arg("mode"),
      nb::arg("baseline").none(), nb::arg("restore_best_weights"), nb::arg("start_from_epoch"),
      nb::arg("verbose"));
  m.def(
      "ModelCheckpoint",
      [](std::string filepath, std::string monitor, bool save_best_only, std::string mode,
         bool verbose, int64_t save_freq) {
        Saver save = saver_for(filepath);
        return ModelCheckpoint(std::move(filepath),
                               {std::move(monitor), save_best_only, std::move(mode), save_freq,
                                save, messages(verbose)});
      },
      nb::arg("filepath"), nb::arg("monitor"), nb::arg("save_best_only"), nb::arg("mode"),
      nb::arg("verbose"), nb::arg("save_freq") = 0);
  m.def("checkpoint_suffixes", [] {
    std::vector<std::string> s;
    for (const auto& [suffix, save] : savers()) s.push_back(suffix);
    return s;
  });
  m.def(
      "LearningRateScheduler",
      [](std::function<double(int, double)> schedule) {
        return LearningRateScheduler(std::move(schedule));
      },
      nb::arg("schedule"));
  m.def(
      "ReduceLROnPlateau",
      [](std::string monitor, double factor, int patience, double min_delta, int cooldown,
         double min_lr, std::string mode, bool verbose) {
        return ReduceLROnPlateau({std::move(monitor), factor, patience, min_delta, cooldown, min_lr,
                                  std::move(mode), messages(verbose)});
      },
      nb::arg("monitor"), nb::arg("factor"), nb::arg("patience"), nb::arg("min_delta"),
      nb::arg("cooldown"), nb::arg("min_lr"), nb::arg("mode"), nb::arg("verbose"));
  m.def("python_float_repr", &python_float_repr, nb::arg("value"));
}

}  // namespace crossover_python
