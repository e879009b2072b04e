#pragma once
// Tensor: a dense row-major array in one backend's memory. Only the backend that made it reads
// or writes its elements; the model sees shapes and passes tensors between backend ops.
#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace tetra {

enum class ElemType : uint8_t { f32, i32, u8 };
inline int64_t elem_bytes(ElemType t) { return t == ElemType::u8 ? 1 : 4; }

class Tensor {
 public:
  Tensor() = default;
  Tensor(Shape shape, ElemType type, std::shared_ptr<std::byte[]> storage)
      : shape_(std::move(shape)), type_(type), storage_(std::move(storage)) {}

  const Shape& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_.at(i); }
  int64_t rows() const { return shape_.empty() ? 1 : shape_[0]; }
  int64_t numel() const { return shape_numel(shape_); }
  int64_t row_numel() const { return shape_.empty() ? 1 : numel() / shape_[0]; }
  ElemType type() const { return type_; }
  bool empty() const { return storage_ == nullptr; }

  // The same elements seen with another shape of equal size.
  Tensor view(Shape shape) const {
    Tensor t = *this;
    t.shape_ = std::move(shape);
    return t;
  }

  // Rows [begin, begin + count) as a tensor sharing this one's storage.
  Tensor rows_view(int64_t begin, int64_t count) const {
    Shape s = shape_;
    s[0] = count;
    const int64_t offset = begin * row_numel() * elem_bytes(type_);
    return Tensor(std::move(s), type_, std::shared_ptr<std::byte[]>(storage_, storage_.get() + offset));
  }

  template <class T>
  T* data() const { return reinterpret_cast<T*>(storage_.get()); }

 private:
  Shape shape_;
  ElemType type_ = ElemType::f32;
  std::shared_ptr<std::byte[]> storage_;
};

}  // namespace tetra
