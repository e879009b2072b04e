#pragma once
// One warp computes one output row of a linear layer for up to kRowTokens tokens: each lane
// dequantizes its 32-input chunks of the weight row once and uses them for every token, so a
// weight byte is read once per kRowTokens tokens (decode reads every weight once per step).
// Single-token calls use a one-accumulator instance: fewer registers, more warps in flight.
#include "backend/cuda/weight_chunk.cuh"

namespace tetra::cuda {

constexpr int kRowTokens = 8;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, off);
  return v;
}

// Lane partial sums acc[t] of row o · x[t] (x row t at x + t·x_stride, `tokens` <= Tokens).
// round_input: the activation is seen as bf16 (the A operand of a W4A16/W8A16 GEMM).
template <int Tokens>
__device__ __forceinline__ void warp_row_dot(const WeightRef& w, int64_t o, const float* x, int64_t x_stride, int tokens,
                                             bool round_input, float (&acc)[Tokens]) {
  const int lane = threadIdx.x & 31;
#pragma unroll 2
  for (int64_t i0 = int64_t(lane) * kChunk; i0 < w.in; i0 += 32 * kChunk) {
    float v[kChunk];
    load_weight_chunk(w, o, i0, v);
    const int count = int(min(int64_t(kChunk), w.in - i0));
#pragma unroll
    for (int t = 0; t < Tokens; ++t) {
      if (t >= tokens) break;
      const float* xr = x + t * x_stride + i0;
      float s = 0;
#pragma unroll
      for (int j = 0; j < kChunk; ++j) {
        if (j < count) {
          const float xv = round_input ? round_bf16(xr[j]) : xr[j];
          s = fmaf(v[j], xv, s);
        }
      }
      acc[t] += s;
    }
  }
}

}  // namespace tetra::cuda
