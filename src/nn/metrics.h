// The metrics compile() takes besides the loss, by Keras's names: each one a MetricKind that
// the device computes per sample from a step's predictions and targets (Backend::metric_sum,
// metric_row in backends/kernel_math.h) and sums over the epoch next to the loss, and how its
// result comes out of that sum (the root of root_mean_squared_error).
//
// "accuracy" ("acc") is Keras's accuracy that goes with the loss (sparse categorical with the
// sparse cross-entropy, categorical with the categorical one, binary with binary cross-entropy):
// the loss's own kernel counts it, at no cost of its own.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"

namespace crossover {

struct MetricSpec {
  std::string name;            // as given: the key in logs and History ("mae"; "val_mae")
  bool loss_accuracy = false;  // "accuracy"/"acc": counted by the loss (kind unused)
  MetricKind kind = MetricKind::mean_absolute_error;
  bool root = false;             // root_mean_squared_error: the root of the mean of squared errors
  float parameter = 0;           // binary_accuracy's threshold (0.5), top-k's k (5)
  bool higher_is_better = true;  // Keras's metric direction ("up" for the accuracies)
};

// The metric Keras's compile(metrics=[name]) means: "accuracy"/"acc", "mae",
// "mean_absolute_error", "MeanAbsoluteError", "mse", "mean_squared_error", "MeanSquaredError",
// "root_mean_squared_error", "categorical_accuracy", "sparse_categorical_accuracy",
// "binary_accuracy", "top_k_categorical_accuracy", "sparse_top_k_categorical_accuracy" (and
// their class names). Throws Error naming the metric for any other.
MetricSpec metric_spec(std::string_view name);

// A name metric_spec reads back as this spec's metric: its own name when it is one ("mae"),
// else its kind's ("mean_squared_error" for MeanSquaredError(name="err")); "accuracy".
std::string metric_identifier(const MetricSpec& spec);

// Every name metric_spec accepts, for messages.
std::string supported_metric_names();

// The keyword argument of the kind's Keras class that MetricSpec::parameter holds: "threshold"
// (BinaryAccuracy), "k" (TopKCategoricalAccuracy, SparseTopKCategoricalAccuracy), or nullptr.
const char* metric_parameter_name(MetricKind kind);

// Sets spec.parameter to a Keras argument's value (`value` given as metric_parameter_name says):
// a top-k's k a whole number of at least 1, a threshold a finite number. Throws Error at `where`
// naming the metric and the argument for any other value, or for a kind without that argument.
void set_metric_parameter(MetricSpec& spec, double value, const std::string& where);

// The spec's Keras class ("TopKCategoricalAccuracy"); "" for the loss's accuracy.
std::string metric_class_name(const MetricSpec& spec);

// Whether the spec is what its identifier (metric_identifier) alone means: the name is one of
// the kind's Keras names and the parameter is the class's default. Otherwise Keras writes the
// metric as an object, with its name and argument.
bool metric_is_plain(const MetricSpec& spec);

// The metric's value over `count` samples whose per-sample values summed to `sum`.
double metric_result(const MetricSpec& spec, double sum, double count);

// Whether the kind reads a class index per row (targets of one column).
bool reads_class_indices(MetricKind kind);

}  // namespace crossover
