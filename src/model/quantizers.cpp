#include "model/quantizers.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace tetra {
namespace {

float abs_max(const float* w, int64_t n, int64_t stride = 1) {
  float m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(w[i * stride]));
  return m;
}

void set_fp4(std::vector<std::byte>& packed, int64_t i, uint8_t code) {
  auto& b = packed[size_t(i / 2)];
  b = (i % 2) ? std::byte((uint8_t(b) & 0x0F) | (code << 4)) : std::byte((uint8_t(b) & 0xF0) | code);
}

}  // namespace

uint8_t ue8m0_scale_code(float amax, float max_code) {
  if (!(amax > 0)) return 0;
  const double ratio = double(amax) / double(max_code);
  int e;
  const double m = std::frexp(ratio, &e);  // ratio = m * 2^e, m in [0.5, 1)
  const int exponent = m == 0.5 ? e - 1 : e;  // ceil(log2(ratio)), exact
  return uint8_t(std::clamp(exponent + 127, 0, 254));
}

QuantizedLinear quantize_nvfp4(const float* w, int64_t out, int64_t in) {
  if (in % 16) runtime_error("NVFP4 needs the input dimension divisible by 16, got ", in);
  QuantizedLinear q{WeightFormat::nvfp4,
                    {DType::u8, {out, in / 2}, std::vector<std::byte>(size_t(out * in / 2))},
                    {DType::f8_e4m3, {out, in / 16}, std::vector<std::byte>(size_t(out * in / 16))}};
  q.global_scale = abs_max(w, out * in) / (6.0f * 448.0f);
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t b = 0; b < in / 16; ++b) {
      const float* block = w + o * in + b * 16;
      const float ideal = q.global_scale > 0 ? abs_max(block, 16) / (6.0f * q.global_scale) : 0.0f;
      const uint8_t scale_code = f32_to_e4m3(ideal);
      q.scale.bytes[size_t(o * (in / 16) + b)] = std::byte(scale_code);
      const float effective = e4m3_to_f32(scale_code) * q.global_scale;
      for (int64_t i = 0; i < 16; ++i)
        set_fp4(q.weight.bytes, o * in + b * 16 + i, effective > 0 ? f32_to_e2m1(block[i] / effective) : 0);
    }
  }
  return q;
}

QuantizedLinear quantize_fp8_block(const float* w, int64_t out, int64_t in) {
  const int64_t rows = (out + 127) / 128, cols = (in + 127) / 128;
  QuantizedLinear q{WeightFormat::fp8_block,
                    {DType::f8_e4m3, {out, in}, std::vector<std::byte>(size_t(out * in))},
                    {DType::f8_e8m0, {rows, cols}, std::vector<std::byte>(size_t(rows * cols))}};
  for (int64_t br = 0; br < rows; ++br) {
    for (int64_t bc = 0; bc < cols; ++bc) {
      const int64_t r0 = br * 128, r1 = std::min(out, r0 + 128), c0 = bc * 128, c1 = std::min(in, c0 + 128);
      float amax = 0;
      for (int64_t r = r0; r < r1; ++r) amax = std::max(amax, abs_max(w + r * in + c0, c1 - c0));
      const uint8_t code = ue8m0_scale_code(amax, 448.0f);
      q.scale.bytes[size_t(br * cols + bc)] = std::byte(code);
      const float inv_scale = std::ldexp(1.0f, 127 - int(code));  // exact: a power of two
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) q.weight.bytes[size_t(r * in + c)] = std::byte(f32_to_e4m3(w[r * in + c] * inv_scale));
    }
  }
  return q;
}

QuantizedLinear quantize_mxfp4(const float* w, int64_t out, int64_t in) {
  if (in % 32) runtime_error("MXFP4 needs the input dimension divisible by 32, got ", in);
  QuantizedLinear q{WeightFormat::mxfp4,
                    {DType::i8, {out, in / 2}, std::vector<std::byte>(size_t(out * in / 2))},
                    {DType::f8_e8m0, {out, in / 32}, std::vector<std::byte>(size_t(out * in / 32))}};
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t b = 0; b < in / 32; ++b) {
      const float* block = w + o * in + b * 32;
      const uint8_t code = ue8m0_scale_code(abs_max(block, 32), 6.0f);
      q.scale.bytes[size_t(o * (in / 32) + b)] = std::byte(code);
      const float inv_scale = std::ldexp(1.0f, 127 - int(code));
      for (int64_t i = 0; i < 32; ++i) set_fp4(q.weight.bytes, o * in + b * 32 + i, f32_to_e2m1(block[i] * inv_scale));
    }
  }
  return q;
}

}  // namespace tetra
