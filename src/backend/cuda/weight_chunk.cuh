#pragma once
// Dequantizes 32 consecutive weights of one row on the fly: the shared inner step of every
// linear kernel. Full chunks of the packed formats come in with 16-byte loads (32 fp4 codes,
// 2x16 fp8 codes, 4x8 bf16 values); partial chunks at the end of a row go element by element.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/formats.cuh"
#include "backend/cuda/fp4_layout.h"
#include "backend/cuda/weight_ref.h"

namespace tetra::cuda {

constexpr int kChunk = 32;

__device__ __forceinline__ float weight_scale(const WeightRef& w, int64_t index) {
  return w.scale_dtype == DType::f32 ? static_cast<const float*>(w.scale)[index]
                                     : decode_e8m0(static_cast<const uint8_t*>(w.scale)[index]);
}

// Exact value of element (o, i).
__device__ __forceinline__ float weight_at(const WeightRef& w, int64_t o, int64_t i) {
  const int64_t k = o * w.in + i;
  const auto* bytes = static_cast<const uint8_t*>(w.weight);
  switch (w.format) {
    case WeightFormat::dense:
      return w.weight_dtype == DType::f32    ? static_cast<const float*>(w.weight)[k]
             : w.weight_dtype == DType::bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(w.weight)[k])
                                             : __half2float(static_cast<const __half*>(w.weight)[k]);
    case WeightFormat::fp8_block: return decode_e4m3(bytes[k]) * weight_scale(w, (o / 128) * ((w.in + 127) / 128) + i / 128);
    case WeightFormat::fp8_tensor: return decode_e4m3(bytes[k]) * static_cast<const float*>(w.scale)[0];
    case WeightFormat::mxfp4: return decode_e2m1(fp4_weight_code(bytes, k)) * weight_scale(w, o * (w.in / 32) + i / 32);
    case WeightFormat::nvfp4:
      return decode_e2m1(fp4_weight_code(bytes, k)) * decode_e4m3(static_cast<const uint8_t*>(w.scale)[o * (w.in / 16) + i / 16]) *
             w.global_scale;
  }
  return 0;
}

// code·scale·global in the CPU's order, so that every product rounds the same way (a word of
// the device layout, fp4_layout.h).
__device__ __forceinline__ void unpack_fp4x8(uint32_t packed, float scale, float global, float* v) {
  const uint32_t word = fp4_unrepack(packed);
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = decode_e2m1(uint8_t((word >> (4 * j)) & 0xF)) * scale * global;
}
__device__ __forceinline__ void unpack_fp8x4(uint32_t word, float scale, float* v) {
#pragma unroll
  for (int j = 0; j < 4; ++j) v[j] = decode_e4m3(uint8_t((word >> (8 * j)) & 0xFF)) * scale;
}

// v[0..32) = row o, inputs i0 .. i0+31 (zeros past the end of the row).
__device__ __forceinline__ void load_weight_chunk(const WeightRef& w, int64_t o, int64_t i0, float (&v)[kChunk]) {
  const bool full = i0 + kChunk <= w.in && w.in % kChunk == 0;
  if (full && w.format != WeightFormat::dense) {
    const auto* bytes = static_cast<const uint8_t*>(w.weight);
    if (w.format == WeightFormat::mxfp4 || w.format == WeightFormat::nvfp4) {
      const uint4 q = *reinterpret_cast<const uint4*>(bytes + (o * w.in + i0) / 2);
      const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int part = 0; part < 4; ++part) {
        if (w.format == WeightFormat::mxfp4)
          unpack_fp4x8(words[part], weight_scale(w, o * (w.in / 32) + i0 / 32), 1.0f, v + 8 * part);
        else
          unpack_fp4x8(words[part], decode_e4m3(static_cast<const uint8_t*>(w.scale)[o * (w.in / 16) + i0 / 16 + part / 2]),
                       w.global_scale, v + 8 * part);
      }
      return;
    }
    const float s = w.format == WeightFormat::fp8_tensor ? static_cast<const float*>(w.scale)[0]
                                                         : weight_scale(w, (o / 128) * ((w.in + 127) / 128) + i0 / 128);
    const uint4* p = reinterpret_cast<const uint4*>(bytes + o * w.in + i0);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const uint4 q = p[half];
      unpack_fp8x4(q.x, s, v + 16 * half);
      unpack_fp8x4(q.y, s, v + 16 * half + 4);
      unpack_fp8x4(q.z, s, v + 16 * half + 8);
      unpack_fp8x4(q.w, s, v + 16 * half + 12);
    }
    return;
  }
  if (full && w.weight_dtype == DType::bf16) {
    const uint4* p = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(w.weight) + o * w.in + i0);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const uint4 b = p[q];
      const uint32_t words[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[8 * q + 2 * j] = decode_bf16(uint16_t(words[j] & 0xFFFF));
        v[8 * q + 2 * j + 1] = decode_bf16(uint16_t(words[j] >> 16));
      }
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < kChunk; ++j) v[j] = i0 + j < w.in ? weight_at(w, o, i0 + j) : 0.0f;
}

}  // namespace tetra::cuda
