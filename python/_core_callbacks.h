// crossover._core's side of fit's callbacks and output (python/_core_callbacks.cpp).
#pragma once

#include <nanobind/nanobind.h>

#include <memory>
#include <string>

#include "crossover.h"

namespace crossover_python {

// The library's Callback that calls a Python CallbackList (crossover/keras/callbacks.py), taking
// the GIL: on_train_begin(), on_epoch_begin(epoch), on_epoch_end(epoch, logs dict),
// on_train_end(), on_test_begin/end, on_predict_begin/end, and the batch hooks of the phases for
// which its wants_batches(phase) is true (predict's logs: {"outputs": the batch's rows}). A Python
// exception raised there leaves fit as that exception (nanobind::python_error), with the model as
// the last finished step left it.
std::shared_ptr<crossover::Callback> python_callbacks(nanobind::object callback_list);

// Writes each piece of text to Python's sys.stdout (looked up at each call, so a redirection
// made meanwhile is followed) and flushes it, taking the GIL.
crossover::TextSink python_stdout();
// Writes a line to Python's sys.stderr, taking the GIL.
void python_stderr_line(const std::string& line);

// _core.Callback (the library's callbacks: on_*(model, ...)), EarlyStopping, ModelCheckpoint,
// LearningRateScheduler, ReduceLROnPlateau and checkpoint_suffixes().
void bind_callbacks(nanobind::module_& m);

}  // namespace crossover_python
