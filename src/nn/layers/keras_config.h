// A layer's Keras config ("config" of one entry of a model's to_json()), read and written by the
// layer kinds (nn/layers/<kind>.cpp) through these helpers, so that each kind's fields, their
// defaults and their refusals are written once, next to its writer.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "nn/initializers.h"
#include "nn/layer.h"
#include "nn/regularizers.h"

namespace crossover {
class LayerKind;  // nn/layers/kind.h
}

namespace crossover::keras_config {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

inline constexpr int64_t kMaxDim = int64_t{1} << 31;
inline constexpr int64_t kMaxElements = int64_t{1} << 40;  // per tensor: far past any real model

// A string from the input, made safe for a one-line message (control characters as '?', at most
// 64 characters).
std::string printable(std::string_view s);
// The JSON value, abbreviated, for a message.
std::string brief(const json& v);
bool is_null_or_absent(const json& obj, const char* key);
// null, absent or false: a feature left off.
bool flag_is_false(const json& v);

// One argument of a kind's Keras class (LayerKind::keras_arguments), as Keras 3.15's __init__
// takes it: its name and its default as JSON (null for None, [1, 1] for (1, 1)). A required
// argument has no default; its `value` is an example, with which the registry's test reads the
// kind. A keyword argument is taken by name only (Keras's **kwargs: Conv2D's lora_rank). The
// arguments every layer takes (name, dtype, trainable, input_shape) are not listed. Python's
// keras.layers makes each class's signature from the list (crossover/keras/layers.py), and
// tests/layer_arguments_test.cpp checks it against the kind's reader and writer.
struct Argument {
  std::string name;
  json value;
  bool required = false;
  bool keyword = false;
};
using Arguments = std::vector<Argument>;
inline Argument required(std::string name, json example) {
  return {std::move(name), std::move(example), true, false};
}
inline Argument keyword(std::string name, json fallback) {
  return {std::move(name), std::move(fallback), false, true};
}
// Keras's use_bias, kernel_initializer, bias_initializer, the regularizers (activity's too) and
// the constraints: Dense's and the convolutions' arguments after activation.
Arguments kernel_and_bias_arguments();
// `a` followed by `b`.
Arguments operator+(Arguments a, const Arguments& b);

// Where a layer is, for messages.
struct LayerRef {
  const std::string& where;
  std::size_t index;  // 1-based; 0: the model itself
  std::string name;
  std::string cls;
  bool alone = false;  // a layer made on its own (keras.layers' classes): `where` is its class

  std::string label() const;
  // Throws Error(where, "<label> field <field>: <why>"); for a layer made alone,
  // Error(where, "argument <field>: <why>").
  [[noreturn]] void fail(std::string_view field, const std::string& why) const;
};

// A shape list: [null, 28, 28] with a batch dimension, or [28, 28] without. Also accepts the
// old {"class_name": "TensorShape", "items": [...]} wrapper.
Shape parse_shape(const json& v, bool has_batch, const LayerRef& ref, std::string_view field);

// One layer's config as its kind reads it. Every accessor marks its field as read; after the
// kind has read its fields, refuse_unread() refuses any other field that is set (not null or
// false): crossover does not know it, so it cannot honour it.
class Reader {
 public:
  Reader(const json& cfg, const LayerRef& ref) : cfg_(cfg), ref_(ref) {}
  const LayerRef& ref() const { return ref_; }
  [[noreturn]] void fail(std::string_view field, const std::string& why) const {
    ref_.fail(field, why);
  }

  // The field, or null when absent or null.
  const json* find(const char* key);
  // Fields read and deliberately ignored.
  void accept(std::initializer_list<const char*> keys);
  // A whole number from 1 to 2^31; `missing` is the message when absent or null.
  int64_t count(const char* key, const std::string& missing);
  // An int or a pair of ints, each from 1 to 2^31 (kernel_size, strides, pool_size).
  std::optional<Size2> pair(const char* key);
  // An int or a list of one int, each from 1 to 2^31 (a 1-D layer's kernel_size, strides).
  std::optional<int64_t> single(const char* key);
  // "padding": valid (the default) or same, any case.
  Padding padding();
  // "axis" of a normalization layer: the last axis only. Keras 3 writes -1 (or [-1] once
  // built); tf.keras 2 a list such as [3] (the last axis of a built model), returned as it is for
  // the model to check against its input when it builds. -1 when absent.
  int64_t last_axis();
  // data_format: channels_last (or null, Keras's default) only.
  void channels_last();
  // An activation crossover runs (a name, or a LeakyReLU or ELU layer given as the activation)
  // into `a`; linear when absent or null.
  void activation(LayerActivation& a, const char* key = "activation");
  bool flag(const char* key, bool fallback);
  double number(const char* key, double fallback);
  // An initializer (a Keras identifier "he_normal" or a serialized {"class_name", "config"});
  // `fallback` (the layer's default) when absent or null.
  Initializer initializer(const char* key, const Initializer& fallback);
  // The field must be null or absent; otherwise fail(key, why).
  void refuse_set(const char* key, const std::string& why);
  // The field must be null, absent or false; otherwise fail(key, why).
  void refuse_true(const char* key, const std::string& why);
  // Dense's and the convolutions' shared fields: use_bias, kernel_initializer and
  // bias_initializer (each left as it is, the layer's default, when absent), the kernel's and
  // the bias's regularizers (weight_regularizers). (activity_regularizer is every layer's:
  // read_layer_config reads it into Layer::activity.)
  void kernel_and_bias(bool& use_bias, Initializer& kernel, Initializer& bias,
                       Regularizer& kernel_regularizer, Regularizer& bias_regularizer);
  // A weight regularizer (Keras's "l1", "l2", "l1_l2" or a serialized L1, L2 or L1L2): none when
  // absent or null; any other (OrthogonalRegularizer, a custom one) refused naming the field.
  Regularizer regularizer(const char* key);
  // Each weight's "<w>_regularizer" (regularizer()) into its Regularizer, then each
  // "<w>_constraint" refused when set: {{"beta", &a.beta_regularizer}, ...}.
  void weight_regularizers(std::initializer_list<std::pair<const char*, Regularizer*>> weights);
  // Refuses the fields no accessor read that are set.
  void refuse_unread() const;

  // The layer a field holds, as Keras serializes one ({"class_name", "config", "module",
  // "registered_name", "build_config"}): a wrapper's "layer", a recurrent layer's "cell". Its
  // messages name this layer and the field; `key` missing or null is fail(key, missing).
  Layer layer(const char* key, const std::string& missing);

  // The input shape the entry declares through the fields any layer may carry
  // (batch_input_shape, input_shape, input_dim), read by the model's reader; empty when none.
  Shape declared_input;

 private:
  const json& cfg_;
  const LayerRef& ref_;
  std::set<std::string> read_;
};

// A layer's "dtype", as Keras writes it (Keras 3.4 on {"module": "keras", "class_name":
// "DTypePolicy", "config": {"name": ...}}, tf.keras 2's Policy, or a plain name); null is
// float32. A policy the engine has not is ref.fail("dtype", why).
DTypePolicy parse_dtype_field(const json& v, const LayerRef& ref);

// What one layer entry of a model's JSON declares.
struct ParsedLayer {
  Layer layer;
  Shape declared_input;  // batch_input_shape / batch_shape, when given
  bool is_input = false;
};

// One layer entry ({"class_name", "config", ...}) of a model's layer list (entry `index`,
// 1-based, of the model `where`), read by its kind; `names` holds the names read so far (a name
// used twice is an Error).
ParsedLayer parse_layer(const json& entry, std::size_t index, const std::string& where,
                        std::set<std::string>& names);
// A layer's config as `kind` reads it, after the fields every layer may carry (name, trainable,
// dtype, the input shape fields), into `out`.
void read_layer_config(const LayerKind& kind, const json& cfg, const LayerRef& ref,
                       ParsedLayer& out);

// Keras 3's form of a layer's dtype policy.
ojson dtype_policy_json(DTypePolicy p);
// A per-sample shape with Keras's batch dimension first: [null, 28, 28].
ojson batch_shape(const Shape& s);
// One layer's Keras "config": its name, trainable and dtype policy, then its kind's arguments
// (an InputLayer's is its shape and name only: its dtype is its input's, not a policy).
ojson layer_config(const Layer& l);
// The layer as Keras serializes it inside another's config ({"module", "class_name", "config",
// "registered_name"}, and "build_config" where the kind writes one and `input` is known).
ojson layer_json(const Layer& l, const Shape& input = {});

// "<w>_regularizer" for each weight w, "activity_regularizer" where `activity`, then
// "<w>_constraint" for each, all null: the fields Keras writes beside a layer's weights.
void write_null_regularizers(ojson& c, std::initializer_list<const char*> weights, bool activity);
// A regularizer as Keras 3.15 serializes it ({"module": "keras.regularizers", "class_name": "L2",
// "config": {"l2": 0.01}, ...}); null for none.
ojson regularizer_json(const Regularizer& r);
// A regularizer from its Keras JSON text ("l2", a serialized L2, null), as a layer's field is
// read (Reader::regularizer): what a custom layer's add_weight(regularizer=...) hands the engine.
// Error(where, "argument regularizer: ...") for one crossover does not run.
Regularizer regularizer_from_keras_json(std::string_view text, const std::string& where);
// weight_regularizers's counterpart: each "<w>_regularizer" as regularizer_json, then each
// "<w>_constraint" null.
void write_weight_regularizers(
    ojson& c, std::initializer_list<std::pair<const char*, const Regularizer*>> weights);
// kernel_and_bias's counterpart: use_bias, the initializers, the regularizers, then the rest of
// write_null_regularizers's fields null (activity_regularizer where `activity`: the convolutions
// write it, Dense does not).
void write_kernel_and_bias(ojson& c, bool use_bias, const Initializer& kernel,
                           const Initializer& bias, const Regularizer& kernel_regularizer,
                           const Regularizer& bias_regularizer, bool activity);

// The layer's activation as Keras 3 writes it: its name, or (leaky_relu and elu with another
// parameter than the name's default) the LeakyReLU or ELU layer given as the activation.
ojson activation_json(const LayerActivation& a);

// A float parameter as a config writes it: the double with the float's shortest decimal (0.3f is
// written 0.3, as Keras writes the Python float it was given, not 0.30000001192092896).
double decimal(float f);

// Keras 3's serialized initializer {"module": "keras.initializers", "class_name": ..., "config":
// its get_config(), "registered_name": null}.
ojson initializer_json(const Initializer& init);
// The initializer a Keras identifier ("he_normal", "HeNormal") or a serialized one names. Throws
// std::invalid_argument(why) for anything else (the caller says where).
Initializer parse_initializer(const json& v);

}  // namespace crossover::keras_config
