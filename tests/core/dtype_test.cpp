// Exact conversions, checked on every byte value against an independent computation: each
// format's value is rebuilt here from its bit fields with integer arithmetic, and encoders are
// checked against a brute-force nearest-value search over the format's whole code table.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"

namespace tetra {
namespace {

// Value of a sign/exponent/mantissa code, written from the format definitions.
double reference_value(uint32_t code, int e_bits, int m_bits, int bias) {
  const uint32_t m = code & ((1u << m_bits) - 1);
  const uint32_t e = (code >> m_bits) & ((1u << e_bits) - 1);
  const double sign = (code >> (e_bits + m_bits)) & 1 ? -1.0 : 1.0;
  double mantissa = double(m) / double(1u << m_bits);
  int exponent = int(e) - bias;
  if (e == 0) exponent = 1 - bias;  // subnormal
  else mantissa += 1.0;
  double p = 1.0;
  for (int i = 0; i < std::abs(exponent); ++i) p = exponent > 0 ? p * 2 : p / 2;
  return sign * mantissa * p;
}

TEST(DType, E4M3AllBytes) {
  for (int b = 0; b < 256; ++b) {
    const float v = e4m3_to_f32(uint8_t(b));
    if ((b & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(v)) << b;
    } else {
      EXPECT_EQ(double(v), reference_value(uint32_t(b), 4, 3, 7)) << b;
    }
  }
  EXPECT_EQ(e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
}

TEST(DType, E5M2AllBytes) {
  for (int b = 0; b < 256; ++b) {
    const float v = e5m2_to_f32(uint8_t(b));
    const int exp = (b >> 2) & 0x1F, man = b & 3;
    if (exp == 31 && man) {
      EXPECT_TRUE(std::isnan(v)) << b;
    } else if (exp == 31) {
      EXPECT_TRUE(std::isinf(v)) << b;
    } else {
      EXPECT_EQ(double(v), reference_value(uint32_t(b), 5, 2, 15)) << b;
    }
  }
  EXPECT_EQ(e5m2_to_f32(0x7B), 57344.0f);
}

TEST(DType, E8M0AllBytes) {
  for (int b = 0; b < 255; ++b) {
    double p = 1.0;
    for (int i = 0; i < std::abs(b - 127); ++i) p = b > 127 ? p * 2 : p / 2;
    EXPECT_EQ(double(e8m0_to_f32(uint8_t(b))), p) << b;
  }
  EXPECT_TRUE(std::isnan(e8m0_to_f32(0xFF)));
}

TEST(DType, E2M1AllCodesAndPackedBytes) {
  const float table[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 16; ++c) EXPECT_EQ(e2m1_to_f32(uint8_t(c)), (c & 8 ? -1 : 1) * table[c & 7]) << c;
  for (int b = 0; b < 256; ++b) {
    const uint8_t packed[1] = {uint8_t(b)};
    EXPECT_EQ(fp4_code_at(packed, 0), b & 0xF);
    EXPECT_EQ(fp4_code_at(packed, 1), b >> 4);
  }
}

TEST(DType, BF16AndF16AllBytePatternsAgainstCompiler) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float bf = bf16_to_f32(uint16_t(h));
    const float want_bf = std::bit_cast<float>(h << 16);
    if (std::isnan(want_bf)) {
      EXPECT_TRUE(std::isnan(bf));
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(bf), std::bit_cast<uint32_t>(want_bf)) << h;
    }
    // _Float16 is the compiler's own IEEE half: an independent implementation.
    const float want_h = float(std::bit_cast<_Float16>(uint16_t(h)));
    const float got_h = f16_to_f32(uint16_t(h));
    if (std::isnan(want_h)) {
      EXPECT_TRUE(std::isnan(got_h));
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(got_h), std::bit_cast<uint32_t>(want_h)) << h;
    }
  }
}

TEST(DType, F16AndBF16EncodersMatchCompilerRounding) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::bit_cast<float>(uint32_t(rng()));
    if (std::isnan(x)) continue;
    EXPECT_EQ(f32_to_f16(x), std::bit_cast<uint16_t>(_Float16(x))) << x;
    // bf16 nearest-even, computed in double: the candidates are the two truncations.
    const uint32_t u = std::bit_cast<uint32_t>(x);
    const float lo = std::bit_cast<float>(u & 0xFFFF0000u), hi = std::bit_cast<float>((u & 0xFFFF0000u) + 0x10000u);
    // Past the largest finite bf16 the next step is 2^128, which rounds to infinity.
    const double hi_value = std::isinf(hi) ? std::copysign(std::ldexp(1.0, 128), double(x)) : double(hi);
    const double dlo = std::fabs(double(x) - double(lo)), dhi = std::fabs(hi_value - double(x));
    uint16_t want = uint16_t(u >> 16);
    if (dhi < dlo || (dhi == dlo && (want & 1))) want = uint16_t(want + 1);
    if (std::isinf(x)) want = uint16_t(u >> 16);
    EXPECT_EQ(f32_to_bf16(x), want) << x;
  }
}

// Brute force: the code whose value is nearest to x (ties to the even code), saturating.
uint8_t nearest_code(float x, int n_codes, float (*decode)(uint8_t), float max_finite) {
  const double v = std::fmax(std::fmin(double(x), max_finite), -double(max_finite));
  int best = -1;
  double best_d = INFINITY;
  for (int c = 0; c < n_codes; ++c) {
    const double cv = decode(uint8_t(c));
    if (std::isnan(cv) || std::isinf(cv)) continue;
    if (cv == 0 && c != 0 && !std::signbit(x)) continue;  // prefer +0 for non-negative x
    if (cv == 0 && c == 0 && std::signbit(x)) continue;
    const double d = std::fabs(cv - v);
    if (d < best_d || (d == best_d && (c & 1) == 0 && (best & 1) == 1)) {
      best = c;
      best_d = d;
    }
  }
  return uint8_t(best);
}

float e2m1_value(uint8_t c) { return e2m1_to_f32(c); }

TEST(DType, FP8AndFP4EncodersRoundToNearestEven) {
  // Every code round-trips, and every midpoint and random value rounds to the brute-force
  // nearest code.
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7F) != 0x7F) {
      EXPECT_EQ(f32_to_e4m3(e4m3_to_f32(uint8_t(b))), b) << b;
    }
    if (((b >> 2) & 0x1F) != 31) {
      EXPECT_EQ(f32_to_e5m2(e5m2_to_f32(uint8_t(b))), b) << b;
    }
  }
  for (int c = 0; c < 16; ++c) EXPECT_EQ(f32_to_e2m1(e2m1_to_f32(uint8_t(c))), c) << c;

  std::vector<float> probes;
  for (int b = 0; b < 0x7E; ++b) probes.push_back(float((double(e4m3_to_f32(uint8_t(b))) + e4m3_to_f32(uint8_t(b + 1))) / 2));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-500, 500), small(-0.02f, 0.02f);
  for (int i = 0; i < 20000; ++i) probes.push_back(i % 2 ? u(rng) : small(rng));
  for (float x : probes) {
    EXPECT_EQ(f32_to_e4m3(x), nearest_code(x, 256, e4m3_to_f32, 448)) << x;
    EXPECT_EQ(f32_to_e5m2(x), nearest_code(x, 256, e5m2_to_f32, 57344)) << x;
    EXPECT_EQ(f32_to_e2m1(x / 64), nearest_code(x / 64, 16, e2m1_value, 6)) << x / 64;
  }
  EXPECT_EQ(f32_to_e4m3(1e9f), 0x7E);   // saturates
  EXPECT_EQ(f32_to_e4m3(-1e9f), 0xFE);
  EXPECT_EQ(f32_to_e2m1(5.0f), 0x6);    // tie between 4 (code 6) and 6 (code 7): even
  EXPECT_EQ(f32_to_e2m1(0.25f), 0x0);   // tie between 0 and 0.5: even
  EXPECT_EQ(f32_to_e2m1(100.0f), 0x7);
}

TEST(DType, NamesAndSizes) {
  for (const char* n : {"F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4", "U8", "I8", "I16", "I32", "I64", "BOOL"}) {
    const auto t = dtype_from_name(n);
    ASSERT_TRUE(t) << n;
    EXPECT_EQ(dtype_name(*t), n);
  }
  EXPECT_FALSE(dtype_from_name("F8_E4M3FNUZ"));
  EXPECT_EQ(dtype_bytes(DType::f4_e2m1, 6), 3u);
  EXPECT_FALSE(dtype_bytes(DType::f4_e2m1, 5));
  EXPECT_EQ(dtype_bytes(DType::i64, 3), 24u);
  EXPECT_FALSE(dtype_bytes(DType::i64, UINT64_MAX / 4));
}

}  // namespace
}  // namespace tetra
