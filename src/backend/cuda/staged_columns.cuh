#pragma once
// Rows of a bf16 linear with f32 inputs (the head, the router) at more than 8 tokens: the
// activations as three bf16 part columns each (mma_rows.cuh, kPartColumns) at 8 token tiles.
// warp_mma_rows splits every activation into its parts in each lane that feeds one of its columns
// (three lanes, all three parts each) and again for every row tile: at 32 tokens those splits,
// not the weights, were what the head's warps spent their instructions on. Here a warp splits each
// activation of its next chunks once, into a slab of shared memory laid out as the mma's B
// fragments, and every lane reads its fragments back with one 8-byte load. The products and their
// order are warp_mma_rows' for dense rows (the same k slots, chunks and steps), so the same bits.
#include <cuda_bf16.h>

#include "backend/cuda/bf16_codes.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_rows.cuh"
#include "backend/cuda/weight_ref.h"

namespace tetra::cuda {

// Whether mma_block takes this path: dense bf16 rows, f32 inputs as part columns, 8 token tiles.
template <WeightFormat F, int NT, int P, bool Gated>
constexpr bool kStagedColumns = F == WeightFormat::dense && P == kPartColumns && NT == 8 && !Gated;

// Chunks (32 bf16 inputs of a row) a warp stages and loads at a time: two as warp_mma_rows for
// its two m-tiles; one for four m-tiles, whose accumulators take the registers of the second.
template <int M>
constexpr int kSlabChunks = M <= kMmaTiles ? 2 : 1;

// A warp's slab: B fragment (lo, hi) of lane l for chunk u, token tile j, k-step s at
// ((u·NT + j)·2 + s)·32 + l.
template <int NT, int M>
constexpr int kSlabEntries = kSlabChunks<M> * NT * 2 * 32;
template <int NT, int M>
constexpr size_t slab_bytes() {
  return size_t(kSlabEntries<NT, M>) * sizeof(uint2);
}

// The parts of the tokens' inputs [k0, k0 + Chunks·32) into the slab: lane (g, t) of tile j
// reads, at k-step s of chunk u, part (8j + g) % 3 of token (8j + g) / 3 at inputs
// k0 + 32u + 8t + 4s + {0, 1} (lo) and {2, 3} (hi), as warp_mma_rows feeds a dense row's segment.
// Inputs at or past k_end and tokens past `tokens` are zeros. Staging lane (sub, t) = (lane / 4,
// lane % 4) takes tokens sub, sub + 8, ... at the inputs of fragment lane t, so the 16 lanes of a
// half-warp store 4 tokens' parts (4 distinct g) at 4 t: 16 distinct banks.
template <int NT, int Chunks>
__device__ __forceinline__ void stage_part_columns(const float* x, int64_t stride, int tokens, int64_t k0,
                                                   int64_t k_end, uint2* slab) {
  constexpr int kTokens = tokens_per_tile<kPartColumns>(NT), kRounds = (kTokens + 7) / 8;
  const int lane = threadIdx.x & 31, sub = lane / 4, t = lane % 4;
  float4 v[kRounds][Chunks][2];
#pragma unroll
  for (int m = 0; m < kRounds; ++m)
#pragma unroll
    for (int u = 0; u < Chunks; ++u)
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        const int token = sub + 8 * m;
        const int64_t k = k0 + 32 * u + 8 * t + 4 * s;
        v[m][u][s] = token < tokens && k < k_end ? *reinterpret_cast<const float4*>(x + token * stride + k)
                                                 : make_float4(0, 0, 0, 0);
      }
#pragma unroll
  for (int m = 0; m < kRounds; ++m) {
    const int token = sub + 8 * m;
    if (token >= kTokens) break;
#pragma unroll
    for (int u = 0; u < Chunks; ++u)
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        uint32_t lo[3], hi[3];
        activation_pairs<3>(v[m][u][s].x, v[m][u][s].y, lo);
        activation_pairs<3>(v[m][u][s].z, v[m][u][s].w, hi);
#pragma unroll
        for (int p = 0; p < 3; ++p) {
          const int column = 3 * token + p, j = column / 8, g = column % 8;
          slab[((u * NT + j) * 2 + s) * 32 + 4 * g + t] = make_uint2(lo[p], hi[p]);
        }
      }
  }
}

// acc[m][j] = rows o0 + 16m .. of w · the part columns of tokens [0, tokens) of x (rows `stride`
// floats apart) over chunks [c_begin, c_end): with M = kMmaTiles, warp_mma_rows<dense, NT,
// kPartColumns, false, true> with strided_columns; with more, the next row tiles' rows by the same
// steps. The weights' first loads go out before the wait for the kernel ahead. Sums of rows at or
// past row_end and of columns past the tokens are not defined.
template <int NT, int M>
__device__ __forceinline__ void warp_staged_rows(const WeightRef& w, int64_t o0, int64_t row_end, const float* x,
                                                 int64_t stride, int tokens, int c_begin, int c_end, uint2* slab,
                                                 float (&acc)[M][NT][4]) {
  constexpr int kChunks = kSlabChunks<M>;
  const int lane = threadIdx.x & 31, g = lane / 4, t = lane % 4;
  const int64_t in = w.in;
  const uint8_t* rows[M][2];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t o = o0 + 16 * m + g + 8 * h;
      rows[m][h] = o < row_end ? static_cast<const uint8_t*>(w.weight) + o * 2 * in : nullptr;
    }
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[m][j][i] = 0;
  const int tiles = (3 * tokens + 7) / 8;  // token tiles holding a part column
  const int64_t k_end = min(in, int64_t(c_end) * 32);
  bool waited = false;
  for (int c0 = c_begin; c0 < c_end; c0 += kChunks) {
    uint4 raw[kChunks][M][2];
#pragma unroll
    for (int u = 0; u < kChunks; ++u) {
      const int64_t k = int64_t(c0 + u) * 32 + 8 * t;
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          raw[u][m][h] = c0 + u < c_end && k < in && rows[m][h] ? load_streaming(rows[m][h] + 2 * k) : make_uint4(0, 0, 0, 0);
    }
    if (!waited) {
      wait_for_inputs();
      waited = true;
    }
    __syncwarp();  // every lane has read the previous slab
    stage_part_columns<NT, kChunks>(x, stride, tokens, int64_t(c0) * 32, k_end, slab);
    __syncwarp();
#pragma unroll
    for (int u = 0; u < kChunks; ++u) {
      if (c0 + u >= c_end) break;
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        uint32_t a[M][4];
#pragma unroll
        for (int m = 0; m < M; ++m) {
          const uint2 p0 = code_pairs<WeightFormat::dense>(raw[u][m][0], s), p1 = code_pairs<WeightFormat::dense>(raw[u][m][1], s);
          a[m][0] = p0.x;
          a[m][1] = p1.x;
          a[m][2] = p0.y;
          a[m][3] = p1.y;
        }
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          if (j >= tiles) break;
          const uint2 b = slab[((u * NT + j) * 2 + s) * 32 + lane];
#pragma unroll
          for (int m = 0; m < M; ++m) mma_bf16(acc[m][j], a[m], b.x, b.y);
        }
      }
    }
  }
  if (!waited) wait_for_inputs();  // a warp without chunks
}

}  // namespace tetra::cuda
