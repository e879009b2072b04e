#include "core/dtype.h"

#include <array>
#include <bit>
#include <cmath>
#include <algorithm>

namespace tetra {
namespace {

struct DTypeInfo {
  DType type;
  std::string_view name;
  int bits;
  bool is_float;
};

constexpr std::array<DTypeInfo, 13> kInfo{{
    {DType::f32, "F32", 32, true},       {DType::f16, "F16", 16, true},
    {DType::bf16, "BF16", 16, true},     {DType::f8_e4m3, "F8_E4M3", 8, true},
    {DType::f8_e5m2, "F8_E5M2", 8, true}, {DType::f8_e8m0, "F8_E8M0", 8, true},
    {DType::f4_e2m1, "F4", 4, true},     {DType::u8, "U8", 8, false},
    {DType::i8, "I8", 8, false},         {DType::i16, "I16", 16, false},
    {DType::i32, "I32", 32, false},      {DType::i64, "I64", 64, false},
    {DType::boolean, "BOOL", 8, false},
}};

const DTypeInfo& info(DType t) { return kInfo[static_cast<size_t>(t)]; }

// A small binary floating-point format: sign bit, `exp_bits` exponent, `man_bits` mantissa.
struct MiniFloat {
  enum class Specials { ieee, all_ones_nan, none };  // f16/e5m2; e4m3 ("fn"); e2m1
  int exp_bits;
  int man_bits;
  int bias;
  Specials specials;

  uint32_t exp_mask() const { return (1u << exp_bits) - 1; }
  uint32_t man_mask() const { return (1u << man_bits) - 1; }
  uint32_t sign_bit() const { return 1u << (exp_bits + man_bits); }

  double decode(uint32_t bits) const {
    const uint32_t man = bits & man_mask();
    const uint32_t exp = (bits >> man_bits) & exp_mask();
    double v;
    if (specials == Specials::ieee && exp == exp_mask())
      v = man ? NAN : INFINITY;
    else if (specials == Specials::all_ones_nan && exp == exp_mask() && man == man_mask())
      v = NAN;
    else if (exp == 0)
      v = std::ldexp(double(man), 1 - bias - man_bits);
    else
      v = std::ldexp(double(man | (1u << man_bits)), int(exp) - bias - man_bits);
    return (bits & sign_bit()) ? -v : v;
  }

  double max_finite() const {
    switch (specials) {
      case Specials::ieee: return decode(((exp_mask() - 1) << man_bits) | man_mask());
      case Specials::all_ones_nan: return decode((exp_mask() << man_bits) | (man_mask() - 1));
      case Specials::none: break;
    }
    return decode((exp_mask() << man_bits) | man_mask());
  }

  // Code (without sign) of a finite magnitude, rounded to nearest even; `a` must round to at
  // most max_finite().
  uint32_t encode_magnitude(double a) const {
    const int emin = 1 - bias;
    int e2;
    std::frexp(a, &e2);  // a = m * 2^e2 with m in [0.5, 1)
    const double quantum = std::ldexp(1.0, std::max(e2 - 1, emin) - man_bits);
    const double v = std::nearbyint(a / quantum) * quantum;  // exact: scaling by powers of two
    if (v == 0) return 0;
    std::frexp(v, &e2);
    const int ve = e2 - 1;
    if (ve < emin) return uint32_t(v / std::ldexp(1.0, emin - man_bits));  // subnormal
    const uint32_t man = uint32_t(v / std::ldexp(1.0, ve - man_bits)) & man_mask();
    return (uint32_t(ve + bias) << man_bits) | man;
  }

  // `saturate`: finite values beyond the range become +-max_finite (the quantizers' rule);
  // otherwise they overflow to infinity as IEEE rounding says.
  uint32_t encode(double x, bool saturate, uint32_t nan_code) const {
    if (std::isnan(x)) return nan_code;
    const uint32_t sign = std::signbit(x) ? sign_bit() : 0;
    const double a = std::fabs(x), top = max_finite();
    const uint32_t inf_code = exp_mask() << man_bits;
    if (std::isinf(a) && specials == Specials::ieee) return sign | inf_code;
    if (a > top) {
      if (saturate || specials != Specials::ieee) return sign | encode_magnitude(top);
      int e2;
      std::frexp(top, &e2);
      const double half_step = std::ldexp(1.0, e2 - 2 - man_bits);
      // max_finite has an odd (all-ones) mantissa, so the tie also goes to infinity.
      return sign | (a >= top + half_step ? inf_code : encode_magnitude(top));
    }
    return sign | encode_magnitude(a);
  }
};

constexpr MiniFloat kF16{5, 10, 15, MiniFloat::Specials::ieee};
constexpr MiniFloat kE4M3{4, 3, 7, MiniFloat::Specials::all_ones_nan};
constexpr MiniFloat kE5M2{5, 2, 15, MiniFloat::Specials::ieee};
constexpr MiniFloat kE2M1{2, 1, 1, MiniFloat::Specials::none};

}  // namespace

int dtype_bits(DType t) { return info(t).bits; }
std::string_view dtype_name(DType t) { return info(t).name; }
bool dtype_is_float(DType t) { return info(t).is_float; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& i : kInfo)
    if (i.name == name) return i.type;
  return std::nullopt;
}

std::optional<uint64_t> dtype_bytes(DType t, uint64_t numel) {
  const uint64_t bits = uint64_t(dtype_bits(t));
  if (numel > UINT64_MAX / bits) return std::nullopt;
  if ((numel * bits) % 8) return std::nullopt;
  return numel * bits / 8;
}

float bf16_to_f32(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }

uint16_t f32_to_bf16(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) return uint16_t((u >> 16) | 0x40);  // keep sign, force a quiet NaN
  u += 0x7FFF + ((u >> 16) & 1);                          // ties to even; overflow reaches inf
  return uint16_t(u >> 16);
}

float f16_to_f32(uint16_t bits) { return float(kF16.decode(bits)); }
uint16_t f32_to_f16(float x) { return uint16_t(kF16.encode(x, false, 0x7E00)); }

float e4m3_to_f32(uint8_t bits) { return float(kE4M3.decode(bits)); }
uint8_t f32_to_e4m3(float x) { return uint8_t(kE4M3.encode(x, true, 0x7F)); }

float e5m2_to_f32(uint8_t bits) { return float(kE5M2.decode(bits)); }
uint8_t f32_to_e5m2(float x) { return uint8_t(kE5M2.encode(x, true, 0x7F)); }

float e8m0_to_f32(uint8_t bits) {
  if (bits == 0xFF) return NAN;
  return std::ldexp(1.0f, int(bits) - 127);
}

float e2m1_to_f32(uint8_t code) { return float(kE2M1.decode(code & 0xF)); }
uint8_t f32_to_e2m1(float x) { return uint8_t(kE2M1.encode(x, true, 0)); }

}  // namespace tetra
