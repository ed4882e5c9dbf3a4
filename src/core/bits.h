#pragma once
// std::bit_cast where the standard library has it (libstdc++ 11 and newer); elsewhere (GCC 10,
// which builds the wheel on Debian 11: docs/SETUP.md) the same bits through memcpy.
#include <bit>
#include <cstring>
#include <type_traits>

namespace crossover {

template <class To, class From>
inline To bit_cast(const From& from) noexcept {
  static_assert(sizeof(To) == sizeof(From) && std::is_trivially_copyable_v<To> &&
                std::is_trivially_copyable_v<From>);
#if defined(__cpp_lib_bit_cast)
  return std::bit_cast<To>(from);
#else
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
#endif
}

}  // namespace crossover
