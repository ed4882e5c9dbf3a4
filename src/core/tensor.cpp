#include "core/tensor.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace crossover {

std::string shape_to_string(const Shape& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

int64_t shape_size(const Shape& shape, const std::string& where) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error(where, "negative dimension in shape " + shape_to_string(shape));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      throw Error(where, "shape " + shape_to_string(shape) + " is too large");
    n *= d;
  }
  return n;
}

Tensor::Tensor(Shape shape) : shape_(std::move(shape)), size_(shape_size(shape_, "Tensor")) {
  auto block = make_aligned<float>(static_cast<std::size_t>(size_));
  data_ = std::shared_ptr<float[]>(block.release(), AlignedFree{});
}

Tensor::Tensor(Shape shape, std::span<const float> values) : Tensor(std::move(shape)) {
  if (static_cast<int64_t>(values.size()) != size_)
    throw Error("Tensor", std::to_string(values.size()) + " values given for shape " +
                              shape_to_string(shape_) + ", which holds " + std::to_string(size_));
  std::copy(values.begin(), values.end(), data_.get());
}

Tensor Tensor::view(Shape shape, std::span<const float> values) {
  Tensor t;
  t.size_ = shape_size(shape, "Tensor");
  if (static_cast<int64_t>(values.size()) != t.size_)
    throw Error("Tensor", std::to_string(values.size()) + " values given for shape " +
                              shape_to_string(shape) + ", which holds " + std::to_string(t.size_));
  t.shape_ = std::move(shape);
  // Not owned: the deleter does nothing. Written through only by callers that own the values.
  t.data_ = std::shared_ptr<float[]>(const_cast<float*>(values.data()), [](float*) {});
  return t;
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  if (rank() == 0 || begin < 0 || end < begin || end > shape_[0])
    throw Error("Tensor::rows", "rows [" + std::to_string(begin) + ", " + std::to_string(end) +
                                    ") out of range for shape " + shape_to_string(shape_));
  Shape s = shape_;
  s[0] = end - begin;
  int64_t row = shape_[0] ? size_ / shape_[0] : 0;
  Tensor t(s);
  std::copy(data_.get() + begin * row, data_.get() + end * row, t.data());
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  if (shape_size(shape) != size_)
    throw Error("Tensor::reshaped",
                "cannot reshape " + shape_to_string(shape_) + " to " + shape_to_string(shape));
  return Tensor(std::move(shape), values());
}

}  // namespace crossover
