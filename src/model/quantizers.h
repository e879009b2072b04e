#pragma once
// Weight quantizers with the rules of SPEC.md, producing exactly the tensors the checkpoint
// formats store: NVFP4 (ModelOpt), FP8 128x128 blocks with ue8m0 scales and MXFP4 (official).
#include <cstdint>
#include <cstddef>
#include <vector>

#include "core/tensor.h"
#include "model/weights.h"

namespace tetra {

struct QuantizedTensor {
  DType dtype;
  Shape shape;
  std::vector<std::byte> bytes;
};

struct QuantizedLinear {
  WeightFormat format;
  QuantizedTensor weight;
  QuantizedTensor scale;       // block scales: ue8m0 (fp8_block, mxfp4) or e4m3 (nvfp4)
  float global_scale = 1;      // nvfp4 weight_scale_2 = amax / (6 * 448)
};

// `w` is row-major [out, in] in f32.
// NVFP4: global scale amax/(6*448); per 16 inputs an e4m3 scale amax_block/(6*global); e2m1
// values w / (scale*global), all rounded to nearest even. Needs in % 16 == 0.
QuantizedLinear quantize_nvfp4(const float* w, int64_t out, int64_t in);
// FP8 block: per 128x128 block scale 2^ceil(log2(amax/448)) (ue8m0), e4m3 values w/scale.
QuantizedLinear quantize_fp8_block(const float* w, int64_t out, int64_t in);
// MXFP4: per 32 inputs scale 2^ceil(log2(amax/6)) (ue8m0), e2m1 values w/scale, packed as I8
// pairs (element 2i in the low nibble). Needs in % 32 == 0.
QuantizedLinear quantize_mxfp4(const float* w, int64_t out, int64_t in);

// The ue8m0 code of the smallest power of two s with amax / s <= max_code (code 0 for amax 0).
uint8_t ue8m0_scale_code(float amax, float max_code);

}  // namespace tetra
