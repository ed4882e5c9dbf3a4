// The optimizer a config holds, as its unit: visit_optimizer calls f.template operator()<Unit>()
// for config's kind, and what every layer of the engine asks of any optimizer (its slots) is
// answered here from the units. Host code only.
#pragma once

#include <string_view>
#include <utility>

#include "backends/step_config.h"

namespace crossover {

template <class F>
decltype(auto) visit_optimizer(OptimizerKind kind, F&& f) {
  switch (kind) {
#define CROSSOVER_VISIT(kind, Unit) \
  case OptimizerKind::kind:         \
    return std::forward<F>(f).template operator()<optimizers::Unit>();
    CROSSOVER_OPTIMIZERS(CROSSOVER_VISIT)
#undef CROSSOVER_VISIT
  }
  return std::forward<F>(f).template operator()<optimizers::Adam>();  // not reached
}

// The unit's Options inside a config of its kind.
template <class Unit>
const typename Unit::Options& options_of(const OptimizerConfig& c);
#define CROSSOVER_OPTIONS_OF(name, Unit)                                                           \
  template <>                                                                                      \
  inline const optimizers::Unit::Options& options_of<optimizers::Unit>(const OptimizerConfig& c) { \
    return c.args.name;                                                                            \
  }                                                                                                \
  /* Makes c the unit's optimizer with these options (the base arguments are the caller's). */     \
  inline void set_options(OptimizerConfig& c, const optimizers::Unit::Options& o) {                \
    c.kind = OptimizerKind::name;                                                                  \
    c.args.name = o;                                                                               \
  }
CROSSOVER_OPTIMIZERS(CROSSOVER_OPTIONS_OF)
#undef CROSSOVER_OPTIONS_OF

// Keras's names of the optimizer's variables per weight held in ParamSlot's slot1, slot2 and
// slot3 ("momentum", "velocity" for Adam, and "velocity_hat" with amsgrad), empty where that slot
// is unused by `config`.
inline optimizers::SlotNames optimizer_slot_names(const OptimizerConfig& c) {
  return visit_optimizer(c.kind, [&]<class Unit>() { return Unit::slots(options_of<Unit>(c)); });
}

// The number of state slots `config` uses per weight (0 to 3).
inline int optimizer_slot_count(const OptimizerConfig& c) {
  int n = 0;
  for (std::string_view s : optimizer_slot_names(c)) n += s.empty() ? 0 : 1;
  return n;
}

// Whether `config` keeps a third slot per weight (Adam's amsgrad: velocity_hat).
inline bool optimizer_third_slot(const OptimizerConfig& c) {
  return !optimizer_slot_names(c)[2].empty();
}

// Whether `config` carries a value between steps besides its slots (Nadam's u_product).
inline bool optimizer_carries_value(const OptimizerConfig& c) {
  return visit_optimizer(c.kind, []<class Unit>() { return Unit::carries_value; });
}

// What slot1 holds before the first step (Adagrad's initial_accumulator_value; else 0).
inline float initial_slot_value(const OptimizerConfig& c) {
  return visit_optimizer(
      c.kind, [&]<class Unit>() { return Unit::initial_slot_value(options_of<Unit>(c)); });
}

}  // namespace crossover
