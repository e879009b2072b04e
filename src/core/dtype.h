#pragma once
// Element types of checkpoints and caches, and exact scalar conversions between them and f32.
#include <cstdint>
#include <optional>
#include <string_view>

namespace tetra {

enum class DType : uint8_t {
  f32, f16, bf16,
  f8_e4m3,  // FP8 "fn": no infinities, 0x7F/0xFF are NaN, max 448
  f8_e5m2,  // FP8 with IEEE infinities and NaNs, max 57344
  f8_e8m0,  // unsigned power of two 2^(e-127), 0xFF is NaN (MX block scales)
  f4_e2m1,  // FP4, two per byte: element 2i in the low nibble
  u8, i8, i16, i32, i64, boolean,
};

// Bits one element occupies in storage (4 for f4_e2m1).
int dtype_bits(DType t);
// The safetensors spelling ("BF16", "F8_E4M3", "F4", ...).
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);
bool dtype_is_float(DType t);

// Bytes of `numel` elements, or nullopt when a packed type would end inside a byte.
std::optional<uint64_t> dtype_bytes(DType t, uint64_t numel);

// ---- exact conversions (decoders are exact; encoders round to nearest, ties to even) ----
float bf16_to_f32(uint16_t bits);
uint16_t f32_to_bf16(float x);  // NaN stays NaN, overflow goes to infinity (IEEE)
float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float x);  // overflow goes to infinity (IEEE)
float e4m3_to_f32(uint8_t bits);
uint8_t f32_to_e4m3(float x);  // saturates to +-448, NaN -> 0x7F
float e5m2_to_f32(uint8_t bits);
uint8_t f32_to_e5m2(float x);  // saturates to +-57344, NaN -> 0x7F, infinities kept
float e8m0_to_f32(uint8_t bits);
float e2m1_to_f32(uint8_t code);  // low 4 bits: sign bit 3, magnitude {0,.5,1,1.5,2,3,4,6}
uint8_t f32_to_e2m1(float x);     // saturates to +-6, NaN -> 0

// Element `i` of packed FP4 data (low nibble first).
inline uint8_t fp4_code_at(const uint8_t* packed, uint64_t i) {
  uint8_t b = packed[i >> 1];
  return (i & 1) ? uint8_t(b >> 4) : uint8_t(b & 0xF);
}

}  // namespace tetra
