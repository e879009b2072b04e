// The quantizers follow SPEC.md's rules exactly: scales are the smallest power of two (FP8
// block, MXFP4) or the e4m3-rounded ideal scale (NVFP4), and every stored code is the nearest
// representable value (ties to even), checked by brute force over each format's code table.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/error.h"
#include "model/quantizers.h"
#include "support/nearest_code.h"

namespace tetra {
namespace {
using testing::brute_force_nearest;

std::vector<float> random_matrix(int64_t out, int64_t in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 0.05f);
  std::vector<float> w(size_t(out * in));
  for (auto& x : w) x = normal(rng);
  w[3] = 0.9f;  // an outlier sets one block's scale apart
  for (int64_t i = 0; i < 16; ++i) w[size_t(in + i)] = 0;  // an all-zero block
  return w;
}

uint8_t nibble(const std::vector<std::byte>& packed, int64_t i) {
  const auto b = uint8_t(packed[size_t(i / 2)]);
  return i % 2 ? b >> 4 : b & 0xF;
}

float e2m1_decode(uint8_t c) { return e2m1_to_f32(c); }

TEST(Quantizers, Ue8m0ScaleIsSmallestSufficientPowerOfTwo) {
  EXPECT_EQ(ue8m0_scale_code(448, 448), 127);
  EXPECT_EQ(ue8m0_scale_code(449, 448), 128);
  EXPECT_EQ(ue8m0_scale_code(224, 448), 126);
  EXPECT_EQ(ue8m0_scale_code(225, 448), 127);
  EXPECT_EQ(ue8m0_scale_code(6, 6), 127);
  EXPECT_EQ(ue8m0_scale_code(0, 6), 0);
}

TEST(Quantizers, NvFp4FollowsTheSpec) {
  const int64_t out = 8, in = 64;
  const auto w = random_matrix(out, in, 1);
  const QuantizedLinear q = quantize_nvfp4(w.data(), out, in);
  EXPECT_EQ(q.weight.shape, (Shape{out, in / 2}));
  EXPECT_EQ(q.scale.dtype, DType::f8_e4m3);
  EXPECT_EQ(q.global_scale, 0.9f / (6.0f * 448.0f));
  double err = 0, norm = 0;
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t b = 0; b < in / 16; ++b) {
      float amax = 0;
      for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(w[size_t(o * in + b * 16 + i)]));
      const uint8_t sc = uint8_t(q.scale.bytes[size_t(o * (in / 16) + b)]);
      EXPECT_EQ(sc, brute_force_nearest(double(amax / (6.0f * q.global_scale)), 0x7F, e4m3_to_f32)) << o << "," << b;
      const float eff = e4m3_to_f32(sc) * q.global_scale;
      for (int i = 0; i < 16; ++i) {
        const int64_t k = o * in + b * 16 + i;
        const uint8_t want = eff > 0 ? brute_force_nearest(double(w[size_t(k)] / eff), 8, e2m1_decode, 8) : 0;
        ASSERT_EQ(nibble(q.weight.bytes, k), want) << k;
        const double deq = e2m1_to_f32(nibble(q.weight.bytes, k)) * double(eff);
        err += (deq - w[size_t(k)]) * (deq - w[size_t(k)]);
        norm += double(w[size_t(k)]) * w[size_t(k)];
      }
    }
  }
  EXPECT_LT(std::sqrt(err / norm), 0.15);
}

TEST(Quantizers, Fp8BlockFollowsTheSpec) {
  const int64_t out = 200, in = 160;  // partial blocks on both axes
  const auto w = random_matrix(out, in, 2);
  const QuantizedLinear q = quantize_fp8_block(w.data(), out, in);
  EXPECT_EQ(q.scale.shape, (Shape{2, 2}));
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      const uint8_t sc = uint8_t(q.scale.bytes[size_t((o / 128) * 2 + i / 128)]);
      const double scale = std::ldexp(1.0, int(sc) - 127);
      const uint8_t got = uint8_t(q.weight.bytes[size_t(o * in + i)]);
      ASSERT_EQ(got, brute_force_nearest(w[size_t(o * in + i)] / scale, 0x7F, e4m3_to_f32, 0x80)) << o << "," << i;
      ASSERT_LE(std::fabs(w[size_t(o * in + i)]) / scale, 448.0);
    }
  }
  // The scale is the smallest power of two that fits the block's amax.
  float amax = 0;
  for (int64_t o = 0; o < 128; ++o)
    for (int64_t i = 0; i < 128; ++i) amax = std::max(amax, std::fabs(w[size_t(o * in + i)]));
  const double s = std::ldexp(1.0, int(uint8_t(q.scale.bytes[0])) - 127);
  EXPECT_LE(amax / s, 448.0);
  EXPECT_GT(amax / (s / 2), 448.0);
}

TEST(Quantizers, MxFp4FollowsTheSpec) {
  const int64_t out = 4, in = 96;
  const auto w = random_matrix(out, in, 3);
  const QuantizedLinear q = quantize_mxfp4(w.data(), out, in);
  EXPECT_EQ(q.weight.dtype, DType::i8);
  EXPECT_EQ(q.scale.shape, (Shape{out, in / 32}));
  for (int64_t k = 0; k < out * in; ++k) {
    const uint8_t sc = uint8_t(q.scale.bytes[size_t((k / in) * (in / 32) + (k % in) / 32)]);
    const double scale = std::ldexp(1.0, int(sc) - 127);
    ASSERT_EQ(nibble(q.weight.bytes, k), brute_force_nearest(w[size_t(k)] / scale, 8, e2m1_decode, 8)) << k;
  }
  EXPECT_THROW(quantize_mxfp4(w.data(), 2, 48), Error);
}

}  // namespace
}  // namespace tetra
