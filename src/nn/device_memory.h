// Backend memory owned by a model: one RAII block, typed views into it.
#pragma once

#include <cstddef>
#include <utility>

#include "backends/backend.h"

namespace crossover {

class DeviceBlock {
 public:
  DeviceBlock() = default;
  DeviceBlock(Backend& backend, std::size_t bytes)
      : backend_(&backend), p_(backend.allocate(bytes)), bytes_(bytes) {}
  ~DeviceBlock() { reset(); }
  DeviceBlock(DeviceBlock&& o) noexcept
      : backend_(std::exchange(o.backend_, nullptr)),
        p_(std::exchange(o.p_, nullptr)),
        bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBlock& operator=(DeviceBlock&& o) noexcept {
    if (this != &o) {
      reset();
      backend_ = std::exchange(o.backend_, nullptr);
      p_ = std::exchange(o.p_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  DeviceBlock(const DeviceBlock&) = delete;
  DeviceBlock& operator=(const DeviceBlock&) = delete;

  void reset() noexcept {
    if (backend_ && p_) backend_->release(p_);
    p_ = nullptr;
    bytes_ = 0;
  }
  template <class T = float>
  T* as() const {
    return static_cast<T*>(p_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  Backend* backend_ = nullptr;
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace crossover
