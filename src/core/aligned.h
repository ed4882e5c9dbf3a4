// 64-byte aligned host memory: the alignment of a cache line and of an AVX-512 vector.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

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

}  // namespace crossover
