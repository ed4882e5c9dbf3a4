// Tensor: a shape and float32 values in 64-byte aligned host memory.
//
// This is the user-facing container: what fit/evaluate/predict take and return,
// and what the data readers produce. Training state lives in backend buffers
// (backends/backend.h); a Tensor is copied to the training device once, not per step.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/aligned.h"

namespace crossover {

using Shape = std::vector<int64_t>;

// "(8000, 28, 28)", as Keras prints shapes.
std::string shape_to_string(const Shape& shape);
// Product of the dimensions; throws Error naming `where` if a dimension is negative or the
// product overflows.
int64_t shape_size(const Shape& shape, const std::string& where = "shape");

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled tensor of the given shape.
  explicit Tensor(Shape shape);
  // Requires values.size() == product(shape).
  Tensor(Shape shape, std::span<const float> values);
  Tensor(Shape shape, std::initializer_list<float> values)
      : Tensor(std::move(shape), std::span<const float>(values.begin(), values.size())) {}

  // A tensor over the caller's values, not a copy, for reading only (fit, evaluate and predict
  // take one): the caller keeps the values alive and unchanged while it, or a copy of it, is in
  // use. Requires values.size() == product(shape).
  static Tensor view(Shape shape, std::span<const float> values);

  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_.at(static_cast<std::size_t>(i)); }
  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  std::span<float> values() { return {data_.get(), static_cast<std::size_t>(size_)}; }
  std::span<const float> values() const { return {data_.get(), static_cast<std::size_t>(size_)}; }
  float& operator[](int64_t i) { return data_.get()[i]; }
  float operator[](int64_t i) const { return data_.get()[i]; }

  // A copy of rows [begin, end) of the first dimension.
  Tensor rows(int64_t begin, int64_t end) const;
  // Same values, another shape of the same size (copies).
  Tensor reshaped(Shape shape) const;

 private:
  Shape shape_;
  int64_t size_ = 0;
  std::shared_ptr<float[]> data_;
};

}  // namespace crossover
