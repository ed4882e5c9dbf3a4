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

// The metric's value over `count` samples whose per-sample values summed to `sum`.
double metric_result(const MetricSpec& spec, double sum, double count);

// Whether the kind reads a class index per row (targets of one column).
bool reads_class_indices(MetricKind kind);

}  // namespace crossover
