#pragma once
// WeightRef: a linear layer's device tensors as the kernels see them (passed by value): the
// checkpoint bytes and scales, dequantized on the fly inside the kernels.
#include <cstdint>

#include "core/dtype.h"
#include "model/weights.h"

namespace tetra::cuda {

struct WeightRef {
  WeightFormat format = WeightFormat::dense;
  DType weight_dtype = DType::f32;  // dense: f32, bf16 or f16
  DType scale_dtype = DType::f32;   // fp8_block / mxfp4: f32 or e8m0
  const void* weight = nullptr;
  const void* scale = nullptr;
  float global_scale = 1;  // nvfp4 weight_scale_2
  int64_t out = 0, in = 0;
};

// Stored the same way (format and dtypes), so that one kernel instance reads both.
inline bool same_encoding(const WeightRef& a, const WeightRef& b) {
  return a.format == b.format && a.weight_dtype == b.weight_dtype && a.scale_dtype == b.scale_dtype;
}

}  // namespace tetra::cuda
