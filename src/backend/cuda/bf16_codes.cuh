#pragma once
// Weight codes as exact bf16 pairs for the tensor-core linear kernels, without lookups or
// per-element conversions. A code's exponent and mantissa bits are placed into the low bits of
// a bf16 exponent field (subnormal codes land on bf16 subnormals), so that each 32-bit word
// becomes bf16x2 registers in two or three integer operations; one bf16x2 multiply then
// restores the exponent bias and applies the block scale (every factor a power of two or an
// e4m3 value, so the products are exact). Activations become bf16 pairs too: rounded to
// nearest (the bf16 A operand), or split exactly into three bf16 parts for f32 numerics.
#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/fp4_layout.h"  // fp4_pair, fp4_packed_pair

namespace tetra::cuda {

// bf16x2 bits: the low half holds the element of lower k.
__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ uint32_t bf16x2_pack(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
__device__ __forceinline__ uint32_t bf16x2_splat(uint16_t bits) { return uint32_t(bits) * 0x10001u; }

// fp8 e4m3 bytes of w as a bf16 pair of value·2^-120 (subnormal codes too), three operations: a
// byte permutation that puts each code in the low byte of its half with its sign bit replicated
// over the high byte (selector nibbles 8-15 do that), then a shift by four, which moves the
// sign to bit 15 and exponent and mantissa to bits 4-10, and a mask of the rest.
template <uint32_t Selector>
__device__ __forceinline__ uint32_t fp8_pair(uint32_t w) {
  uint32_t spread;
  asm("prmt.b32 %0, %1, 0, %2;" : "=r"(spread) : "r"(w), "n"(Selector));
  return (spread << 4) & 0x87F087F0u;
}
// Bytes b0..b3 of w: (b0, b2), (b1, b3), (b0, b1), (b2, b3).
__device__ __forceinline__ uint32_t fp8_pair_even(uint32_t w) { return fp8_pair<0xA280>(w); }
__device__ __forceinline__ uint32_t fp8_pair_odd(uint32_t w) { return fp8_pair<0xB391>(w); }
__device__ __forceinline__ uint32_t fp8_pair_low(uint32_t w) { return fp8_pair<0x9180>(w); }
__device__ __forceinline__ uint32_t fp8_pair_high(uint32_t w) { return fp8_pair<0xB3A2>(w); }
constexpr uint16_t kFp8Bias = 0x7B80;  // bf16 2^120


// MXFP4 factor 2^126·2^(e-127) = 2^(e-1) for a ue8m0 scale byte e <= 128 (every real scale);
// larger scales take two factors: 2^126, then 2^(e-127) (NaN for 0xFF).
__device__ __forceinline__ uint32_t mxfp4_factor(uint8_t e) { return bf16x2_splat(uint16_t((uint32_t(e) + 126) << 7)); }
__device__ __forceinline__ uint32_t mxfp4_large_scale(uint8_t e) {
  return bf16x2_splat(e == 0xFF ? uint16_t(0x7FC0) : uint16_t(uint32_t(e) << 7));
}
constexpr uint16_t kFp4Bias = 0x7E80;  // bf16 2^126

// NVFP4 factor 2^126·s·2^-8 for an e4m3 scale s: exact in bf16 (s has 4 significant bits and
// s·2^118 < 2^127); the 2^8 goes into the f32 global scale.
constexpr float kNvfp4Shift = 256.0f;
__device__ __forceinline__ uint32_t nvfp4_factor(float e4m3_scale) {
  const __nv_bfloat16 b = __float2bfloat16_rn(e4m3_scale * 0x1p118f);
  return bf16x2_splat(*reinterpret_cast<const uint16_t*>(&b));
}
// nvfp4_factor of both e4m3 scale bytes of `bits` (low byte: `low`), each splat over a pair, in
// seven integer and bf16 operations for the two instead of an f32 decode, multiply and rounding
// for each: fp8_pair_low makes the two bytes s·2^-120 at once, two exact multiplies by 2^119 give
// s·2^118, and a byte permutation splats each half. Scales are never NaN here: upload_linear
// rejects NaN NVFP4 scales.
constexpr uint16_t kBf16Pow119 = 0x7B00;
__device__ __forceinline__ void nvfp4_factors(uint32_t bits, uint32_t& low, uint32_t& high) {
  const uint32_t pow119 = bf16x2_splat(kBf16Pow119);
  const uint32_t both = bf16x2_mul(bf16x2_mul(fp8_pair_low(bits), pow119), pow119);
  asm("prmt.b32 %0, %1, 0, 0x1010;" : "=r"(low) : "r"(both));
  asm("prmt.b32 %0, %1, 0, 0x3232;" : "=r"(high) : "r"(both));
}

// Activations (lo, hi) as Parts bf16 pairs whose sum is the input: Parts = 1 rounds to nearest
// even (what the CPU reference's bf16 rounding does); Parts = 3 is exact for f32 (24 significand
// bits = 3 × 8; each remainder is exact in f32).
template <int Parts>
__device__ __forceinline__ void activation_pairs(float lo, float hi, uint32_t (&out)[Parts]) {
  out[0] = bf16x2_pack(lo, hi);
  if constexpr (Parts == 3) {
    const float lo1 = lo - __uint_as_float(out[0] << 16), hi1 = hi - __uint_as_float(out[0] & 0xFFFF0000u);
    out[1] = bf16x2_pack(lo1, hi1);
    out[2] = bf16x2_pack(lo1 - __uint_as_float(out[1] << 16), hi1 - __uint_as_float(out[1] & 0xFFFF0000u));
  }
}

// c += a·b: m16n8k16, bf16 inputs, f32 accumulators (a: rows g, g+8 × k slots; b: k × token g).
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace tetra::cuda
