// The cache layouts' roundings follow SPEC.md bit for bit.
#include "backend/cpu/cache_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/dtype.h"

namespace tetra {
namespace {

TEST(CacheCodec, CeilLog2IsExact) {
  EXPECT_EQ(ceil_log2(1.0f), 0);
  EXPECT_EQ(ceil_log2(1.0000001f), 1);
  EXPECT_EQ(ceil_log2(0.5f), -1);
  EXPECT_EQ(ceil_log2(0.75f), 0);
  EXPECT_EQ(ceil_log2(std::ldexp(1.0f, -126)), -126);
}

TEST(CacheCodec, Fp8KvEntryFollowsTheSpec) {
  // 64 nope values (one block, amax 3.5 -> scale 2^ceil(log2(3.5/448)) = 2^-7) + 16 rope values
  std::vector<float> row(80);
  for (int i = 0; i < 64; ++i) row[size_t(i)] = 3.5f * std::sin(float(i) * 0.7f) * (i == 5 ? 1.0f / std::sin(3.5f) : 1.0f);
  row[5] = 3.5f;
  for (int i = 64; i < 80; ++i) row[size_t(i)] = 1.0f + float(i) * 1e-3f;
  std::vector<uint8_t> bytes(64 + 32 + 8);
  encode_kv_fp8(row, 16, bytes);
  EXPECT_EQ(bytes[64 + 32], 127 - 7);
  std::vector<float> back(80);
  decode_kv_fp8(bytes, 16, back);
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(back[size_t(i)], e4m3_to_f32(f32_to_e4m3(row[size_t(i)] * 128.0f)) / 128.0f) << i;
  for (int i = 64; i < 80; ++i) EXPECT_EQ(back[size_t(i)], bf16_to_f32(f32_to_bf16(row[size_t(i)]))) << i;
}

TEST(CacheCodec, Fp8KvTinyBlockUsesTheFloor) {
  std::vector<float> row(64, 1e-6f);
  std::vector<uint8_t> bytes(64 + 8);
  encode_kv_fp8(row, 0, bytes);
  EXPECT_EQ(int(bytes[64]) - 127, ceil_log2(1e-4f / 448.0f));
}

TEST(CacheCodec, HadamardIsOrthogonal) {
  std::vector<float> v{1, 0, 0, 0};
  hadamard_rotate(v);
  for (float x : v) EXPECT_FLOAT_EQ(x, 0.5f);
  hadamard_rotate(v);
  EXPECT_FLOAT_EQ(v[0], 1.0f);
  EXPECT_NEAR(v[1], 0.0f, 1e-7);
}

TEST(CacheCodec, Fp4IndexerEntryFollowsTheSpec) {
  std::vector<float> row(32);
  for (int i = 0; i < 32; ++i) row[size_t(i)] = std::cos(float(i) * 1.3f) * 5.0f;
  std::vector<uint8_t> bytes(16 + 1);
  encode_indexer_fp4(row, bytes);
  std::vector<float> rotated = row;
  hadamard_rotate(rotated);
  float amax = 0;
  for (float x : rotated) amax = std::max(amax, std::fabs(x));
  const int e = ceil_log2(std::max(amax, std::ldexp(6.0f, -126)) / 6.0f);
  EXPECT_EQ(int(bytes[16]) - 127, e);
  std::vector<float> back(32);
  decode_indexer_fp4(bytes, back);
  for (int i = 0; i < 32; ++i)
    EXPECT_EQ(back[size_t(i)], e2m1_to_f32(f32_to_e2m1(std::ldexp(rotated[size_t(i)], -e))) * std::ldexp(1.0f, e)) << i;
}

}  // namespace
}  // namespace tetra
