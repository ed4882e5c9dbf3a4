// The CUDA backend's caching device allocator.
//
// Blocks are rounded up to a size class (four classes per power of two, so at most 25% is
// wasted), and a released block goes onto its class's free list instead of back to the driver:
// the next allocate() of that class reuses it without cudaMalloc. Everything is returned to the
// driver when the allocator is destroyed (with its backend), or when cudaMalloc runs out of
// memory and the cached blocks are freed to retry.
//
// Reuse is safe without events because the backend has one stream: work on a block enqueued
// after it is handed out again runs after all work enqueued before it was released.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <unordered_map>
#include <vector>

namespace crossover::cuda {

class CachingAllocator {
 public:
  explicit CachingAllocator(int ordinal) : ordinal_(ordinal) {}
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` (256-byte aligned, contents undefined). Throws Error when the
  // device is out of memory even after the cache is emptied; `sync` is called before the cached
  // blocks are freed (they may still be in use by enqueued work).
  template <class Sync>
  void* allocate(std::size_t bytes, Sync&& sync) {
    const std::size_t size = size_class(bytes);
    if (auto it = free_.find(size); it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      live_.emplace(p, size);
      cached_bytes_ -= size;
      return p;
    }
    void* p = nullptr;
    if (!try_malloc(&p, size)) {
      sync();
      free_cached();
      malloc_or_throw(&p, size, bytes);
    }
    live_.emplace(p, size);
    return p;
  }

  void release(void* p) noexcept;
  void free_cached() noexcept;

  static std::size_t size_class(std::size_t bytes);
  std::size_t live_bytes() const;
  std::size_t cached_bytes() const { return cached_bytes_; }

 private:
  bool try_malloc(void** p, std::size_t size) noexcept;
  void malloc_or_throw(void** p, std::size_t size, std::size_t asked);

  int ordinal_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;  // size class -> blocks
  std::unordered_map<void*, std::size_t> live_;               // block -> size class
  std::size_t cached_bytes_ = 0;
};

}  // namespace crossover::cuda
