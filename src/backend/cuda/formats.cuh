#pragma once
// Exact device conversions of the checkpoint and cache element formats. Decoders are exact;
// encoders round to nearest, ties to even, and saturate, mirroring core/dtype.cpp bit for bit
// so that device-encoded caches equal the CPU reference's bytes.
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/e2m1_code.h"

namespace tetra::cuda {

__device__ __forceinline__ float decode_e4m3(uint8_t b) {
  __nv_fp8_e4m3 v;
  v.__x = b;
  return float(v);
}
// 2^(b-127) from its bits (b = 0: the subnormal 2^-127), NaN for 0xFF.
__device__ __forceinline__ float decode_e8m0(uint8_t b) {
  return b == 0xFF ? __int_as_float(0x7FC00000) : b == 0 ? __int_as_float(0x00400000) : __int_as_float(uint32_t(b) << 23);
}
__device__ __forceinline__ float decode_e2m1(uint8_t code) {
  // Tiny format: computing the value is cheaper than a lookup table in local memory.
  const uint8_t m = code & 7;
  const float v = m < 2 ? 0.5f * m : m < 4 ? 1.0f + 0.5f * (m - 2) : m < 6 ? 2.0f + (m - 4) : 4.0f + 2.0f * (m - 6);
  return (code & 8) ? -v : v;
}
__device__ __forceinline__ uint8_t fp4_code(const uint8_t* packed, int64_t i) {
  const uint8_t b = packed[i >> 1];
  return (i & 1) ? uint8_t(b >> 4) : uint8_t(b & 0xF);
}
__device__ __forceinline__ float decode_bf16(uint16_t bits) { return __uint_as_float(uint32_t(bits) << 16); }
__device__ __forceinline__ uint16_t encode_bf16(float x) {
  uint32_t u = __float_as_uint(x);
  if (isnan(x)) return uint16_t((u >> 16) | 0x40);
  u += 0x7FFF + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}
// bf16 rounding of an activation (the A operand dtype of the linear layers).
__device__ __forceinline__ float round_bf16(float x) { return decode_bf16(encode_bf16(x)); }

// Smallest e with 2^e >= x (x > 0), exactly (the power-of-two scale rule of the caches).
__device__ __forceinline__ int ceil_log2(float x) {
  int e = 0;
  const float m = frexpf(x, &e);
  return m == 0.5f ? e - 1 : e;
}

// Sign-less code of a finite magnitude `a` <= the format's largest value, rounded to nearest
// even (exact: every step scales by powers of two).
__device__ __forceinline__ uint32_t encode_magnitude(float a, int man_bits, int bias) {
  const int emin = 1 - bias;
  int e2 = 0;
  frexpf(a, &e2);
  const float quantum = ldexpf(1.0f, max(e2 - 1, emin) - man_bits);
  const float v = rintf(a / quantum) * quantum;
  if (v == 0) return 0;
  frexpf(v, &e2);
  const int ve = e2 - 1;
  if (ve < emin) return uint32_t(v / ldexpf(1.0f, emin - man_bits));
  const uint32_t man = uint32_t(v / ldexpf(1.0f, ve - man_bits)) & ((1u << man_bits) - 1);
  return (uint32_t(ve + bias) << man_bits) | man;
}
// Saturates to +-448, NaN -> 0x7F. From sm_89 on, the hardware conversion: round to nearest even
// and saturation to the largest finite code, as the software path (one instruction against a
// chain of frexpf, rintf and divisions); its NaN code may carry the sign, so NaN is selected first.
__device__ __forceinline__ uint8_t encode_e4m3(float x) {
  if (isnan(x)) return 0x7F;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  return uint8_t(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
#else
  const uint32_t sign = signbit(x) ? 0x80u : 0u;
  return uint8_t(sign | encode_magnitude(fminf(fabsf(x), 448.0f), 3, 7));
#endif
}
__device__ __forceinline__ uint8_t encode_e2m1(float x) { return e2m1_code(x); }  // e2m1_code.h

}  // namespace tetra::cuda
