#pragma once
// A block of warps computes one output row per warp of a linear layer for up to Tokens tokens.
// The block stages each 1024-input segment of the tokens' activations in shared memory
// (coalesced, bf16-rounded once); each lane dequantizes its 32-input chunk of its row once
// (16-byte loads, issued before the staging barrier so that they overlap it) and uses it for
// every token. A weight byte is read once per Tokens tokens: once per decode step.
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/weight_chunk.cuh"

namespace tetra::cuda {

constexpr int kRowTokens = 8;                    // tokens per block beyond single-token calls
constexpr int kSegment = 32 * kChunk;            // inputs one warp covers per pass
constexpr int kLanePitch = kChunk + 4;           // skewed: lanes' 16-byte reads hit distinct banks
constexpr int kTilePitch = 32 * kLanePitch;      // floats of one token's staged segment

// acc[t] (lane partial sums) += row o · x[t] for t < tokens (x row t at x + t·x_stride).
// Every thread of the block calls it with the same x, tokens and w.in (row_active false for a
// warp without a row); tile: Tokens·kTilePitch floats of shared memory, 16-byte aligned.
// round_input: the activation is seen as bf16 (the A operand of a W4A16/W8A16 GEMM).
template <int Tokens>
__device__ __forceinline__ void block_row_dot(const WeightRef& w, int64_t o, bool row_active, const float* x,
                                              int64_t x_stride, int tokens, bool round_input, float* tile,
                                              float (&acc)[Tokens]) {
  const int lane = threadIdx.x & 31;
  for (int64_t seg = 0; seg < w.in; seg += kSegment) {
    const int64_t i0 = seg + int64_t(lane) * kChunk;
    const bool lane_active = row_active && i0 < w.in;
    float v[kChunk] = {};
    if (lane_active) load_weight_chunk(w, o, i0, v);
    __syncthreads();  // every warp is done with the previous segment's tile
    for (int k = threadIdx.x; k < Tokens * kSegment; k += blockDim.x) {
      const int t = k / kSegment, i = k % kSegment;
      float xv = 0;
      if (t < tokens && seg + i < w.in) {
        xv = x[t * x_stride + seg + i];
        if (round_input) xv = round_bf16(xv);
      }
      tile[t * kTilePitch + (i / kChunk) * kLanePitch + i % kChunk] = xv;
    }
    __syncthreads();
    if (!lane_active) continue;
#pragma unroll
    for (int t = 0; t < Tokens; ++t) {
      if (t >= tokens) break;
      const float4* xr = reinterpret_cast<const float4*>(tile + t * kTilePitch + lane * kLanePitch);
      float s = 0;
#pragma unroll
      for (int q = 0; q < kChunk / 4; ++q) {
        const float4 xv = xr[q];
        s = fmaf(v[4 * q], xv.x, s);
        s = fmaf(v[4 * q + 1], xv.y, s);
        s = fmaf(v[4 * q + 2], xv.z, s);
        s = fmaf(v[4 * q + 3], xv.w, s);
      }
      acc[t] += s;
    }
  }
}

}  // namespace tetra::cuda
