// What an optimizer unit is made of (backends/optimizers/<name>.h, one file per Keras optimizer,
// listed in list.h). A unit holds, in one place:
//   - class_name and name: Keras's class ("Adam") and its default name ("adam");
//   - Options: Keras's arguments with Keras's defaults, in the order Keras's signature takes
//     them, with the base optimizer's learning_rate, weight_decay, clipnorm (Keras's
//     global_clipnorm) and clipvalue; the C++ API fills it with designated initializers;
//   - arguments: the unit's own arguments as Keras names them in get_config, each with its
//     range (the formats, Python and the constructor read and check them from here);
//   - slots(options): Keras's names of the optimizer's variables per weight (ParamSlot's slot1,
//     slot2, slot3; empty where unused) and initial_slot_value (what slot1 starts at);
//   - constants(): the per-step values (UpdateConstants::k), in Keras's float32 arithmetic;
//   - element(): the update of one element of one parameter, compiled for the CPU and CUDA alike.
// Device code sees Options by value inside OptimizerConfig (step_config.h), so Options holds only
// numbers and flags.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string_view>

#include "core/philox.h"  // CROSSOVER_HD

namespace crossover {

// Per-step constants, computed once per step, in the float32 arithmetic Keras 3 uses: the
// learning rate and up to kUpdateConstants values that each unit names (an enum of its own). A
// plain aggregate (no default member initializers), so that CUDA can keep one in shared memory.
inline constexpr int kUpdateConstants = 8;
struct UpdateConstants {
  float lr;
  float k[kUpdateConstants];
};

// A value an optimizer carries from one step to the next besides its slots (Nadam's u_product:
// Keras's optimizer variable), with the step it was last brought to. StepCounters holds it; a step
// count set from outside (a checkpoint) leaves `step` behind, and the unit recomputes the value.
struct CarriedValue {
  int64_t step = 0;
  float value = 1;
};

// Keras's float32 b^t: b cast to float32, raised to the float32 step (here in double from the
// float32 base, correctly rounded once).
CROSSOVER_HD float float_power(double b, int64_t t) {
  return static_cast<float>(
      std::pow(static_cast<double>(static_cast<float>(b)), static_cast<double>(t)));
}

namespace optimizers {

// Where a number argument may lie: [low, high], each end open or closed.
struct Range {
  double low = -1e300;
  double high = 1e300;
  bool low_open = false;
  bool high_open = false;
};
inline constexpr Range kAny{};
inline constexpr Range kPositive{.low = 0, .low_open = true};
inline constexpr Range kNotNegative{.low = 0};
inline constexpr Range kUnitOpen{.low = 0, .high = 1, .high_open = true};  // [0, 1)

// One of a unit's own arguments, by its Keras name: a number or a flag member of the unit's
// Options, or a setting crossover does not have that Keras writes (`fixed`: only its false/0
// value is accepted, and it is written as false; `refusal` says why another is refused).
template <class Options, class T>
using MemberOf = T Options::*;

template <class Options>
struct Argument {
  std::string_view name;
  MemberOf<Options, double> number = nullptr;
  MemberOf<Options, bool> flag = nullptr;
  Range range = kAny;
  // Keras casts the argument to float32 where it multiplies a tensor (epsilon, momentum):
  // crossover keeps it as the float32 it rounds to and writes that float's shortest decimal.
  // Betas and rho stay as given (Keras subtracts them from 1 in Python, in double).
  bool float32 = false;
  std::string_view refusal = {};
};

template <class Options>
constexpr Argument<Options> number(std::string_view name, MemberOf<Options, double> member,
                                   Range range, bool float32 = false) {
  return {.name = name, .number = member, .range = range, .float32 = float32};
}
template <class Options>
constexpr Argument<Options> flag(std::string_view name, MemberOf<Options, bool> member) {
  return {.name = name, .flag = member};
}
template <class Options>
constexpr Argument<Options> refused(std::string_view name, std::string_view why) {
  return {.name = name, .refusal = why};
}

// Adam's, Nadam's and Adamax's own arguments (Keras writes the three alike): beta_1 and beta_2 in
// [0, 1), kept as given, and a positive float32 epsilon.
template <class Options>
constexpr std::array<Argument<Options>, 3> betas_and_epsilon() {
  return {number("beta_1", &Options::beta_1, kUnitOpen),
          number("beta_2", &Options::beta_2, kUnitOpen),
          number("epsilon", &Options::epsilon, kPositive, true)};
}

using SlotNames = std::array<std::string_view, 3>;

// The defaults a unit may leave out.
struct Unit {
  // Whether the unit carries a value between steps (carry()): Keras counts it as a variable.
  static constexpr bool carries_value = false;
  template <class Options>
  static float initial_slot_value(const Options&) {
    return 0.0f;
  }
  // The carried value before step t and after it (only Nadam carries one).
  template <class Options>
  CROSSOVER_HD static void carry(const Options&, const UpdateConstants&, CarriedValue&, int64_t) {}
};

}  // namespace optimizers
}  // namespace crossover
