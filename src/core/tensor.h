#pragma once
// A non-owning view of a dense row-major tensor in host memory (for example a tensor inside a
// memory-mapped safetensors file).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace tetra {

using Shape = std::vector<int64_t>;

inline int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const Shape& shape);  // "[129280, 4096]"

struct TensorView {
  DType dtype = DType::f32;
  Shape shape;
  const std::byte* data = nullptr;
  uint64_t nbytes = 0;

  int64_t numel() const { return shape_numel(shape); }
  template <class T>
  const T* as() const { return reinterpret_cast<const T*>(data); }
};

}  // namespace tetra
