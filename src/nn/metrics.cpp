#include "nn/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace crossover {
namespace {

struct NamedMetric {
  const char* snake;  // Keras's function name (and the class's snake-case name)
  const char* class_name;
  const char* alias;  // Keras's short name ("mae"), or nullptr
  MetricKind kind;
  bool root;
  float parameter;
  bool higher_is_better;
};

// Keras 3's keras.metrics.get names (keras/src/metrics/__init__.py): the class names, their
// snake case, and the short aliases (each also in capitals).
constexpr NamedMetric kMetrics[] = {
    {"mean_absolute_error", "MeanAbsoluteError", "mae", MetricKind::mean_absolute_error, false, 0,
     false},
    {"mean_squared_error", "MeanSquaredError", "mse", MetricKind::mean_squared_error, false, 0,
     false},
    {"root_mean_squared_error", "RootMeanSquaredError", nullptr, MetricKind::mean_squared_error,
     true, 0, false},
    {"categorical_accuracy", "CategoricalAccuracy", nullptr, MetricKind::categorical_accuracy,
     false, 0, true},
    {"sparse_categorical_accuracy", "SparseCategoricalAccuracy", nullptr,
     MetricKind::sparse_categorical_accuracy, false, 0, true},
    {"binary_accuracy", "BinaryAccuracy", nullptr, MetricKind::binary_accuracy, false, 0.5f, true},
    {"top_k_categorical_accuracy", "TopKCategoricalAccuracy", nullptr,
     MetricKind::top_k_categorical_accuracy, false, 5, true},
    {"sparse_top_k_categorical_accuracy", "SparseTopKCategoricalAccuracy", nullptr,
     MetricKind::sparse_top_k_categorical_accuracy, false, 5, true},
};

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

}  // namespace

MetricSpec metric_spec(std::string_view name) {
  MetricSpec spec;
  spec.name = std::string(name);
  if (lower(name) == "accuracy" || lower(name) == "acc") {  // Keras compares in lower case
    spec.loss_accuracy = true;
    return spec;
  }
  for (const NamedMetric& m : kMetrics) {
    if (name == m.snake || name == m.class_name ||
        (m.alias && (name == m.alias || name == upper(m.alias)))) {
      spec.kind = m.kind;
      spec.root = m.root;
      spec.parameter = m.parameter;
      spec.higher_is_better = m.higher_is_better;
      return spec;
    }
  }
  throw Error("compile", "metric '" + std::string(name) +
                             "' is not supported (yet): crossover computes " +
                             supported_metric_names() +
                             " (not Precision, Recall, AUC or the other Keras metrics)");
}

std::string metric_identifier(const MetricSpec& spec) {
  if (spec.loss_accuracy) return "accuracy";
  for (const NamedMetric& m : kMetrics)
    if (m.kind == spec.kind && m.root == spec.root) {
      for (const char* name : {m.snake, m.class_name, m.alias})
        if (name && spec.name == name) return spec.name;
      if (m.alias && spec.name == upper(m.alias)) return spec.name;
      return m.snake;
    }
  return spec.name;
}

std::string supported_metric_names() {
  std::string out = "'accuracy'";
  for (const NamedMetric& m : kMetrics) {
    out += ", '";
    out += m.alias ? m.alias : m.snake;
    out += "'";
    if (m.alias) out += std::string(" ('") + m.snake + "')";
  }
  return out;
}

const char* metric_parameter_name(MetricKind kind) {
  switch (kind) {
    case MetricKind::binary_accuracy:
      return "threshold";
    case MetricKind::top_k_categorical_accuracy:
    case MetricKind::sparse_top_k_categorical_accuracy:
      return "k";
    default:
      return nullptr;
  }
}

void set_metric_parameter(MetricSpec& spec, double value, const std::string& where) {
  const char* argument = spec.loss_accuracy ? nullptr : metric_parameter_name(spec.kind);
  const std::string what = "metric '" + spec.name + "'";
  if (!argument) throw Error(where, what + " takes no argument k or threshold");
  if (!std::isfinite(value))
    throw Error(where, what + ": " + argument + " must be a finite number");
  if (std::string_view(argument) == "k") {
    // k counts classes: a whole number, and one that a float holds exactly.
    if (value < 1 || value != std::floor(value) || value > 16777216.0)
      throw Error(where,
                  what + fmt::format(": k must be a whole number of at least 1, got {:g}", value));
  } else if (std::fabs(value) > std::numeric_limits<float>::max()) {
    throw Error(where, what + fmt::format(": threshold {:g} is out of float range", value));
  }
  spec.parameter = static_cast<float>(value);
}

std::string metric_class_name(const MetricSpec& spec) {
  if (spec.loss_accuracy) return "";
  for (const NamedMetric& m : kMetrics)
    if (m.kind == spec.kind && m.root == spec.root) return m.class_name;
  return "";
}

bool metric_is_plain(const MetricSpec& spec) {
  if (spec.loss_accuracy) return true;
  for (const NamedMetric& m : kMetrics)
    if (m.kind == spec.kind && m.root == spec.root)
      return metric_identifier(spec) == spec.name && spec.parameter == m.parameter;
  return false;
}

double metric_result(const MetricSpec& spec, double sum, double count) {
  const double mean = sum / std::max(count, 1.0);
  return spec.root ? std::sqrt(mean) : mean;
}

bool reads_class_indices(MetricKind kind) {
  return kind == MetricKind::sparse_categorical_accuracy ||
         kind == MetricKind::sparse_top_k_categorical_accuracy;
}

}  // namespace crossover
