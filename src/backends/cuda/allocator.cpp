#include "backends/cuda/allocator.h"

#include <bit>
#include <string>

#include "backends/cuda/check.h"
#include "core/aligned.h"
#include "core/error.h"

namespace crossover::cuda {

CachingAllocator::~CachingAllocator() {
  free_cached();
  for (auto& [p, size] : live_) cudaFree(p);
}

std::size_t CachingAllocator::size_class(std::size_t bytes) {
  constexpr std::size_t kMin = 512;
  if (bytes <= kMin) return kMin;
  const std::size_t top = std::bit_floor(bytes);
  if (top == bytes) return bytes;
  const std::size_t step = top / 4;
  return (bytes + step - 1) / step * step;
}

std::size_t CachingAllocator::live_bytes() const {
  std::size_t total = 0;
  for (const auto& [p, size] : live_) total += size;
  return total;
}

void CachingAllocator::release(void* p) noexcept {
  if (p == nullptr) return;
  auto it = live_.find(p);
  if (it == live_.end()) return;  // not ours: ignore rather than corrupt the cache
  const std::size_t size = it->second;
  live_.erase(it);
  try {
    free_[size].push_back(p);
    cached_bytes_ += size;
  } catch (...) {
    cudaFree(p);  // could not cache it (host out of memory): give it back instead
  }
}

void CachingAllocator::free_cached() noexcept {
  for (auto& [size, blocks] : free_)
    for (void* p : blocks) cudaFree(p);
  free_.clear();
  cached_bytes_ = 0;
}

bool CachingAllocator::try_malloc(void** p, std::size_t size) noexcept {
  if (cudaMalloc(p, size) == cudaSuccess) return true;
  cudaGetLastError();  // clear the out-of-memory error
  return false;
}

void CachingAllocator::malloc_or_throw(void** p, std::size_t size, std::size_t asked) {
  const cudaError_t e = cudaMalloc(p, size);
  if (e == cudaSuccess) return;
  cudaGetLastError();
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) cudaGetLastError();
  throw Error(device_where(ordinal_),
              "out of memory: cudaMalloc of " + bytes_to_string(static_cast<double>(asked)) +
                  " failed: " + cudaGetErrorString(e) + "; " +
                  bytes_to_string(static_cast<double>(free_bytes)) + " free (cudaMemGetInfo), " +
                  bytes_to_string(static_cast<double>(live_bytes())) + " in use by crossover");
}

}  // namespace crossover::cuda
