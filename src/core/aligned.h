// 64-byte aligned host memory: the alignment of a cache line and of an AVX-512 vector.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

namespace crossover {

inline constexpr std::size_t kHostAlignment = 64;

struct AlignedFree {
  void operator()(void* p) const noexcept { std::free(p); }
};

// Requires: count >= 0. Ensures: a 64-byte aligned block of `count` T, zero-filled
// (uninitialised memory never reaches a computation). Throws std::bad_alloc.
template <class T>
std::unique_ptr<T[], AlignedFree> make_aligned(std::size_t count) {
  std::size_t bytes = (count * sizeof(T) + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  if (bytes == 0) bytes = kHostAlignment;
  void* p = std::aligned_alloc(kHostAlignment, bytes);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  return std::unique_ptr<T[], AlignedFree>(static_cast<T*>(p));
}

// A byte count for messages, exact and readable: "12544000002048 bytes (11.4 TiB)". A double,
// so that a size too large for size_t (a request no machine could meet) still prints.
inline std::string bytes_to_string(double bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  char buf[96];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof buf, "%.0f bytes", bytes);
    return buf;
  }
  double scaled = bytes / 1024;
  int unit = 0;
  while (scaled >= 1024 && unit < 5) {
    scaled /= 1024;
    ++unit;
  }
  std::snprintf(buf, sizeof buf, "%.0f bytes (%.1f %s)", bytes, scaled, kUnits[unit]);
  return buf;
}

}  // namespace crossover
