#include "backend/cpu/cache_codec.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace tetra {

int ceil_log2(float x) {
  int e = 0;
  const float m = std::frexp(x, &e);  // x = m·2^e, m in [0.5, 1)
  return m == 0.5f ? e - 1 : e;
}

namespace {

constexpr int64_t kFp8Block = 64;
constexpr int64_t kFp4Block = 32;

float amax_of(std::span<const float> v) {
  float a = 0;
  for (float x : v) a = std::max(a, std::fabs(x));
  return a;
}

}  // namespace

void encode_kv_fp8(std::span<const float> row, int64_t rope_dim, std::span<uint8_t> out) {
  const int64_t nope = int64_t(row.size()) - rope_dim;
  const int64_t blocks = (nope + kFp8Block - 1) / kFp8Block;
  uint8_t* scales = out.data() + nope + 2 * rope_dim;
  std::fill(scales, out.data() + out.size(), uint8_t(0));
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kFp8Block, count = std::min(kFp8Block, nope - begin);
    const int e = ceil_log2(std::max(amax_of(row.subspan(size_t(begin), size_t(count))), 1e-4f) / 448.0f);
    const float inv = std::ldexp(1.0f, -e);  // exact: a power of two
    for (int64_t i = begin; i < begin + count; ++i) out[size_t(i)] = f32_to_e4m3(row[size_t(i)] * inv);
    scales[b] = uint8_t(e + 127);
  }
  for (int64_t i = 0; i < rope_dim; ++i) {
    const uint16_t bits = f32_to_bf16(row[size_t(nope + i)]);
    out[size_t(nope + 2 * i)] = uint8_t(bits & 0xFF);
    out[size_t(nope + 2 * i + 1)] = uint8_t(bits >> 8);
  }
}

void decode_kv_fp8(std::span<const uint8_t> in, int64_t rope_dim, std::span<float> row) {
  const int64_t nope = int64_t(row.size()) - rope_dim;
  const uint8_t* scales = in.data() + nope + 2 * rope_dim;
  for (int64_t i = 0; i < nope; ++i)
    row[size_t(i)] = e4m3_to_f32(in[size_t(i)]) * e8m0_to_f32(scales[i / kFp8Block]);
  for (int64_t i = 0; i < rope_dim; ++i)
    row[size_t(nope + i)] = bf16_to_f32(uint16_t(in[size_t(nope + 2 * i)] | (in[size_t(nope + 2 * i + 1)] << 8)));
}

void hadamard_rotate(std::span<float> v) {
  const size_t n = v.size();
  if (n == 0 || (n & (n - 1))) runtime_error("Hadamard rotation needs a power-of-two size, got ", n);
  for (size_t len = 1; len < n; len <<= 1)
    for (size_t i = 0; i < n; i += 2 * len)
      for (size_t j = i; j < i + len; ++j) {
        const float a = v[j], b = v[j + len];
        v[j] = a + b;
        v[j + len] = a - b;
      }
  const float norm = 1.0f / std::sqrt(float(n));
  for (float& x : v) x *= norm;
}

void encode_indexer_fp4(std::span<const float> row, std::span<uint8_t> out) {
  std::vector<float> v(row.begin(), row.end());
  hadamard_rotate(v);
  const size_t n = v.size();
  uint8_t* scales = out.data() + n / 2;
  std::fill(out.begin(), out.end(), uint8_t(0));
  for (size_t b = 0; b * kFp4Block < n; ++b) {
    const size_t begin = b * kFp4Block, count = std::min<size_t>(kFp4Block, n - begin);
    const float floor = std::ldexp(6.0f, -126);
    const int e = ceil_log2(std::max(amax_of(std::span<const float>(v).subspan(begin, count)), floor) / 6.0f);
    const float inv = std::ldexp(1.0f, -e);
    for (size_t i = begin; i < begin + count; ++i) {
      const uint8_t code = f32_to_e2m1(v[i] * inv);
      out[i / 2] |= uint8_t((i & 1) ? code << 4 : code);
    }
    scales[b] = uint8_t(e + 127);
  }
}

void decode_indexer_fp4(std::span<const uint8_t> in, std::span<float> row) {
  const size_t n = row.size();
  const uint8_t* scales = in.data() + n / 2;
  for (size_t i = 0; i < n; ++i) row[i] = e2m1_to_f32(fp4_code_at(in.data(), i)) * e8m0_to_f32(scales[i / kFp4Block]);
}

}  // namespace tetra
