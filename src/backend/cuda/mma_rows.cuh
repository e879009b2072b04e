#pragma once
// Rows of a linear layer on the tensor cores for up to 8·NT tokens: the decode-shaped kernels'
// shared inner loop. A warp owns R m-tiles of 16 rows and a range of 64-byte chunks of those
// rows; lane (g = lane/4, t = lane%4) reads, in every chunk, the t-th 16-byte segment of rows
// g and g+8 of each m-tile, exactly once (two chunks in flight), and turns it into exact bf16
// values in registers (bf16_codes.cuh). The order of k inside a chunk is free as long as the
// A (weights) and B (activations) fragments agree, so each lane feeds the mma its segment's
// values in the order its decoder produces them and loads the matching activations itself
// (f32 from L1/L2, converted to bf16 pairs). Each weight is decoded once for all tokens.
#include <cuda_bf16.h>

#include <type_traits>

#include "backend/cuda/bf16_codes.cuh"
#include "backend/cuda/formats.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/weight_ref.h"

namespace tetra::cuda {

// How 16 bytes of a row of format F feed the mma: `values` codes, in `steps` k-steps of four
// values per lane and row; `group` activations are loaded together for `group_steps` steps.
template <WeightFormat F>
struct MmaCodes {
  static constexpr bool fp4 = F == WeightFormat::mxfp4 || F == WeightFormat::nvfp4;
  static constexpr bool fp8 = F == WeightFormat::fp8_block || F == WeightFormat::fp8_tensor;
  static constexpr int values = fp4 ? 32 : fp8 ? 16 : 8;
  static constexpr int steps = values / 4;
  static constexpr int chunk = 4 * values;  // inputs of a row per 64-byte chunk
  static constexpr int group = fp4 ? 8 : 4;
  static constexpr int group_steps = fp4 ? 2 : 1;
  __host__ __device__ static constexpr int64_t row_bytes(int64_t in) { return fp4 ? in / 2 : fp8 ? in : 2 * in; }
};

// Rows per warp and mma tiles: two m-tiles (32 rows, or 16 rows of two matrices when gated).
constexpr int kMmaTiles = 2;

// How f32 activations feed the bf16 mmas (the kernels' template argument P):
// - kRounded: rounded to bf16, one mma per token tile;
// - kThreeParts: split exactly into three bf16 parts, three mmas into the same accumulators;
// - kPartColumns: the three parts of each token in three columns of the tile (column v holds part
//   v % 3 of token v / 3), one mma; the caller adds each token's three columns in order. f32-exact
//   like kThreeParts at a third of the mmas when a tile has few tokens (the head at decode).
enum InputParts : int { kRounded = 1, kThreeParts = 3, kPartColumns = -3 };
// Tokens in a tile of NT mma columns groups.
template <int P>
__host__ __device__ constexpr int tokens_per_tile(int nt) {
  return P == kPartColumns ? 8 * nt / 3 : 8 * nt;
}

__device__ __forceinline__ uint4 load_streaming(const uint8_t* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// A fragments of step s for one row's 16 bytes (before the factor): the pair of low k slots
// and the pair of high k slots, and the activation positions (inside the step's group) that
// each pair's two values multiply.
template <WeightFormat F>
__device__ __forceinline__ uint2 code_pairs(const uint4& q, int s) {
  using C = MmaCodes<F>;
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
  if constexpr (C::fp4) return {fp4_packed_pair(w[s / 2], 2 * (s % 2)), fp4_packed_pair(w[s / 2], 2 * (s % 2) + 1)};
  else if constexpr (C::fp8) return {fp8_pair_even(w[s]), fp8_pair_odd(w[s])};
  else return {w[2 * s], w[2 * s + 1]};
}
// Positions (lo0, lo1, hi0, hi1) of step-in-group h's activations.
template <WeightFormat F>
__device__ __forceinline__ int4 pair_positions(int h) {
  using C = MmaCodes<F>;
  if constexpr (C::fp4) return {2 * h, 2 * h + 4, 2 * h + 1, 2 * h + 5};
  else if constexpr (C::fp8) return {0, 2, 1, 3};
  else return {0, 1, 2, 3};
}

// One chunk: acc[r][j] += rows of m-tile r · tokens of tile j. raw[r][h]: 16 bytes of row g
// (h = 0) or g+8 (h = 1); factor[r][h][b]: the bf16x2 multiplier of half b of the segment
// (NVFP4: one scale per 16 values); second: MXFP4 scales above 2 take a second factor.
// x[j]: the lane's activations for token tile j at the segment start; unless Present, null when
// that segment is absent (past the row's end).
template <WeightFormat F, int NT, int P, bool Second, bool Present>
__device__ __forceinline__ void chunk_mma(const uint4 (&raw)[kMmaTiles][2], const uint32_t (&factor)[kMmaTiles][2][2],
                                          const uint32_t (&second)[kMmaTiles][2], const float* const (&x)[NT],
                                          float (&acc)[kMmaTiles][NT][4]) {
  using C = MmaCodes<F>;
  // The activation loads are L2 hits whose latency, paid once per group, bounded the first
  // version (short rows took 8 µs whatever their size): when the chunk's activations fit in
  // 64 registers, they are all requested before the first group's decode. __ldca (ld.global.ca):
  // a coherent load, which stays after the wait for the kernel ahead where __ldg's did not
  // (launch.cuh); a plain dereference here compiled to generic loads, 75 more instructions in the
  // NVFP4 loop and a spill in the FP8 expert down-projection.
  constexpr bool kPreload = NT * C::values <= 64;
  float preloaded[kPreload ? NT : 1][kPreload ? C::values : 1];
  if constexpr (kPreload) {
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int v = 0; v < C::values / 4; ++v) {
        const float4 f = Present || x[j] ? __ldca(reinterpret_cast<const float4*>(x[j]) + v) : make_float4(0, 0, 0, 0);
        preloaded[j][4 * v] = f.x;
        preloaded[j][4 * v + 1] = f.y;
        preloaded[j][4 * v + 2] = f.z;
        preloaded[j][4 * v + 3] = f.w;
      }
  }
#pragma unroll
  for (int gi = 0; gi < C::steps / C::group_steps; ++gi) {
    uint32_t a[kMmaTiles][C::group_steps][4];
#pragma unroll
    for (int r = 0; r < kMmaTiles; ++r)
#pragma unroll
      for (int h = 0; h < C::group_steps; ++h) {
        const int s = gi * C::group_steps + h;
        uint2 p[2] = {code_pairs<F>(raw[r][0], s), code_pairs<F>(raw[r][1], s)};
        if constexpr (F != WeightFormat::dense) {
#pragma unroll
          for (int row = 0; row < 2; ++row) {
            const uint32_t f = factor[r][row][C::fp4 ? s / 4 : 0];
            p[row].x = bf16x2_mul(p[row].x, f);
            p[row].y = bf16x2_mul(p[row].y, f);
            if constexpr (Second) {
              p[row].x = bf16x2_mul(p[row].x, second[r][row]);
              p[row].y = bf16x2_mul(p[row].y, second[r][row]);
            }
          }
        }
        a[r][h][0] = p[0].x;
        a[r][h][1] = p[1].x;
        a[r][h][2] = p[0].y;
        a[r][h][3] = p[1].y;
      }
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      float xv[C::group] = {};
      if constexpr (kPreload) {
#pragma unroll
        for (int v = 0; v < C::group; ++v) xv[v] = preloaded[j][gi * C::group + v];
      } else if (Present || x[j]) {
        const float4* src = reinterpret_cast<const float4*>(x[j] + gi * C::group);
#pragma unroll
        for (int v = 0; v < C::group / 4; ++v) {
          const float4 f = __ldca(src + v);
          xv[4 * v] = f.x;
          xv[4 * v + 1] = f.y;
          xv[4 * v + 2] = f.z;
          xv[4 * v + 3] = f.w;
        }
      }
#pragma unroll
      for (int h = 0; h < C::group_steps; ++h) {
        const int4 at = pair_positions<F>(h);
        constexpr int kMmas = P == kThreeParts ? 3 : 1;
        uint32_t lo[kMmas], hi[kMmas];
        if constexpr (P == kPartColumns) {
          uint32_t lo3[3], hi3[3];
          activation_pairs<3>(xv[at.x], xv[at.y], lo3);
          activation_pairs<3>(xv[at.z], xv[at.w], hi3);
          const int part = (8 * j + (threadIdx.x & 31) / 4) % 3;  // of this lane's column
          lo[0] = part == 0 ? lo3[0] : part == 1 ? lo3[1] : lo3[2];
          hi[0] = part == 0 ? hi3[0] : part == 1 ? hi3[1] : hi3[2];
        } else {
          activation_pairs<kMmas>(xv[at.x], xv[at.y], lo);
          activation_pairs<kMmas>(xv[at.z], xv[at.w], hi);
        }
#pragma unroll
        for (int r = 0; r < kMmaTiles; ++r)
#pragma unroll
          for (int part = 0; part < kMmas; ++part) mma_bf16(acc[r][j], a[r][h], lo[part], hi[part]);
      }
    }
  }
}

// The f32 factor applied to a finished dot product (per-tensor FP8 scale, NVFP4 global scale).
template <WeightFormat F>
__device__ __forceinline__ float output_scale(const WeightRef& w) {
  if constexpr (F == WeightFormat::fp8_tensor) return static_cast<const float*>(w.scale)[0];
  else if constexpr (F == WeightFormat::nvfp4) return w.global_scale * kNvfp4Shift;
  else return 1.0f;
}

// The lane's B column in each of the NT token tiles is column 8j + lane/4: `columns[j]` points
// at the start of that column's activations (this matrix's input slice), null for an empty
// column. A column's sums do not depend on what the other columns hold, so any rows may share a
// tile (the experts gather the pairs of one expert).
// Columns for `tokens` rows `stride` floats apart from x (column v holds token v, or with part
// columns a part of token v / 3).
template <int NT, int P>
__device__ __forceinline__ void strided_columns(const float* x, int64_t stride, int tokens,
                                                const float* (&columns)[NT]) {
  const int g = (threadIdx.x & 31) / 4;
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int token = P == kPartColumns ? (8 * j + g) / 3 : 8 * j + g;
    columns[j] = token < tokens ? x + token * stride : nullptr;
  }
}

// acc[r][j] = rows of m-tile r · the token columns of tile j over chunks [c_begin, c_end), with
// every scale applied. Gated: m-tile 0 reads rows o0..o0+15 of wa, m-tile 1 the same rows of wb;
// otherwise m-tile r reads rows o0+16r.. of wa. The sums of rows at or past row_end and of null
// columns are not defined (their callers store none). FP8 rows run the chunks wholly inside the
// row without a predicate (they were a quarter of the loop's instructions, and its warps waited
// on loads half the time): absent rows read row row_end - 1 and absent columns lane 0's first
// column (a present token). The other formats keep every check: unchecked, the experts of one
// token ran NVFP4 45.2 -> 47.1 us and bf16 83.8 -> 119.1 where FP8's gained 65.1 -> 56.2
// (graph-timed linear bench, H200).
// Chunks in flight per warp. Four took 150-178 registers a thread at one token tile (no spills,
// but 12-13 warps an SM instead of 16, so the decode grids of ~2048 warps needed a second wave:
// fp8 wq_b 14.7 -> 21.8 us on the H200) and spilled when held to 128.
constexpr int kChunksInFlight = 2;
// EarlyWeights: the caller has not waited for the kernel ahead (launch.cuh); the first chunks'
// weight loads go out before the wait, which comes before any activation is read. InFlight: the
// chunks a warp loads before it consumes them (the sums come out the same for any count).
template <WeightFormat F, int NT, int P, bool Gated, bool EarlyWeights = false, int InFlight = kChunksInFlight>
__device__ __forceinline__ void warp_mma_rows(const WeightRef& wa, const WeightRef& wb, int64_t o0, int64_t row_end,
                                              const float* const (&columns)[NT], int c_begin, int c_end,
                                              float (&acc)[kMmaTiles][NT][4]) {
  using C = MmaCodes<F>;
  constexpr bool kUnchecked = C::fp8;
  const int lane = threadIdx.x & 31, g = lane / 4, t = lane % 4;
  const int64_t in = wa.in;
  // Each row's codes and (FP4) scales, in registers: read from the WeightRef in the loop (the
  // experts' lie in global memory), the scales' base was a load before every scale load, and
  // ptxas issued the NVFP4 up-projection's second chunk after the first one's products.
  constexpr int64_t kInputsPerScale = F == WeightFormat::nvfp4 ? 16 : F == WeightFormat::mxfp4 ? 32 : 0;
  const uint8_t* rows[kMmaTiles][2] = {};
  [[maybe_unused]] const uint8_t* scale_rows[kMmaTiles][2] = {};
#pragma unroll
  for (int r = 0; r < kMmaTiles; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const WeightRef& w = Gated && r == 1 ? wb : wa;
      int64_t o = o0 + (Gated ? 0 : 16 * r) + g + 8 * h;
      if (kUnchecked) o = min(o, row_end - 1);
      if (o < row_end) {
        rows[r][h] = static_cast<const uint8_t*>(w.weight) + o * C::row_bytes(in);
        if constexpr (kInputsPerScale > 0) scale_rows[r][h] = static_cast<const uint8_t*>(w.scale) + o * (in / kInputsPerScale);
      }
    }
  const auto first_column = kUnchecked ? reinterpret_cast<const float*>(__shfl_sync(
                                             0xFFFFFFFFu, reinterpret_cast<unsigned long long>(columns[0]), 0))
                                       : nullptr;
  const float* x[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) x[j] = columns[j] || !kUnchecked ? columns[j] : first_column;
  const int64_t fp8_blocks_per_row = (in + 127) / 128;
#pragma unroll
  for (int r = 0; r < kMmaTiles; ++r)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[r][j][i] = 0;

  bool waited = !EarlyWeights;
  // Chunks c0 .. c0 + InFlight - 1; Whole: all of them lie inside [c_begin, c_end) and the
  // row, and nothing is checked.
  auto chunks_mma = [&](auto whole, int c0) {
    constexpr bool kWhole = decltype(whole)::value;
    uint4 raw[InFlight][kMmaTiles][2];
    uint32_t scale_bits[InFlight][kMmaTiles][2];  // MXFP4 byte / NVFP4 two bytes / FP8-block raw bits
#pragma unroll
    for (int u = 0; u < InFlight; ++u) {
      const int64_t k = int64_t(c0 + u) * C::chunk + t * C::values;
      const bool seg = kWhole || (c0 + u < c_end && k < in);
#pragma unroll
      for (int r = 0; r < kMmaTiles; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const bool ok = seg && (kUnchecked || rows[r][h]);
          raw[u][r][h] = ok ? load_streaming(rows[r][h] + C::row_bytes(k)) : make_uint4(0, 0, 0, 0);
          [[maybe_unused]] const WeightRef& w = Gated && r == 1 ? wb : wa;  // bf16 has no scales
          if constexpr (F == WeightFormat::mxfp4)
            scale_bits[u][r][h] = ok ? scale_rows[r][h][k / 32] : 127u;
          else if constexpr (F == WeightFormat::nvfp4)
            scale_bits[u][r][h] = ok ? *reinterpret_cast<const uint16_t*>(scale_rows[r][h] + k / 16) : 0u;
          else if constexpr (F == WeightFormat::fp8_block) {
            // one scale per m-tile: its 16 rows lie in one 128-row block (the dispatch checks)
            const int64_t index = ((o0 + (Gated ? 0 : 16 * r)) / 128) * fp8_blocks_per_row + int64_t(c0 + u) * C::chunk / 128;
            if (h == 0 && (kWhole || c0 + u < c_end))
              scale_bits[u][r][0] = w.scale_dtype == DType::f32 ? __float_as_uint(static_cast<const float*>(w.scale)[index])
                                                                : static_cast<const uint8_t*>(w.scale)[index];
          }
        }
    }
    if (!waited) {
      wait_for_inputs();
      waited = true;
    }
#pragma unroll
    for (int u = 0; u < InFlight; ++u) {
      if (!kWhole && c0 + u >= c_end) break;
      const float* xs[NT];
      const int64_t k = int64_t(c0 + u) * C::chunk + t * C::values;
#pragma unroll
      for (int j = 0; j < NT; ++j) xs[j] = kWhole || (x[j] && k < in) ? x[j] + k : nullptr;
      uint32_t factor[kMmaTiles][2][2], second[kMmaTiles][2];
      [[maybe_unused]] bool large = false;  // MXFP4 only
#pragma unroll
      for (int r = 0; r < kMmaTiles; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          [[maybe_unused]] const uint32_t b = scale_bits[u][r][h];
          if constexpr (F == WeightFormat::mxfp4) {
            large |= b > 128;
            factor[r][h][0] = factor[r][h][1] = b > 128 ? bf16x2_splat(kFp4Bias) : mxfp4_factor(uint8_t(b));
            second[r][h] = b > 128 ? mxfp4_large_scale(uint8_t(b)) : bf16x2_splat(0x3F80);
          } else if constexpr (F == WeightFormat::nvfp4) {
            nvfp4_factors(b, factor[r][h][0], factor[r][h][1]);
            second[r][h] = 0;
          } else {
            factor[r][h][0] = factor[r][h][1] = bf16x2_splat(kFp8Bias);
            second[r][h] = 0;
          }
        }
      if constexpr (F == WeightFormat::fp8_block) {
        float part[kMmaTiles][NT][4] = {};
        chunk_mma<F, NT, P, false, kWhole>(raw[u], factor, second, xs, part);
#pragma unroll
        for (int r = 0; r < kMmaTiles; ++r) {
          const WeightRef& w = Gated && r == 1 ? wb : wa;
          const uint32_t b = scale_bits[u][r][0];
          const float s = w.scale_dtype == DType::f32 ? __uint_as_float(b) : decode_e8m0(uint8_t(b));
#pragma unroll
          for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[r][j][i] = fmaf(s, part[r][j][i], acc[r][j][i]);
        }
      } else if constexpr (F == WeightFormat::mxfp4) {
        if (__any_sync(0xFFFFFFFFu, large)) chunk_mma<F, NT, P, true, kWhole>(raw[u], factor, second, xs, acc);
        else chunk_mma<F, NT, P, false, kWhole>(raw[u], factor, second, xs, acc);
      } else {
        chunk_mma<F, NT, P, false, kWhole>(raw[u], factor, second, xs, acc);
      }
    }
  };
  // The whole chunks InFlight at a time, then the rest (fewer, a row's partial last chunk) checked.
  const int whole_end = kUnchecked ? int(min(int64_t(c_end), in / C::chunk)) : c_begin;
  int c0 = c_begin;
  for (; c0 + InFlight <= whole_end; c0 += InFlight) chunks_mma(std::true_type{}, c0);
  for (; c0 < c_end; c0 += InFlight) chunks_mma(std::false_type{}, c0);
  if (!waited) wait_for_inputs();  // a warp without chunks
#pragma unroll
  for (int r = 0; r < kMmaTiles; ++r) {
    const float s = output_scale<F>(Gated && r == 1 ? wb : wa);
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[r][j][i] *= s;
  }
}

// Split-K across the block's warps: warp 0 ends with the sum of every warp's acc, added in
// warp order (deterministic). red: (warps - 1)·kMmaTiles·NT·4·32 floats of shared memory.
template <int NT>
__device__ __forceinline__ void split_k_sum(float (&acc)[kMmaTiles][NT][4], float* red) {
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  if (warps == 1) return;
  constexpr int N = kMmaTiles * NT * 4;
  if (warp > 0) {
#pragma unroll
    for (int r = 0; r < kMmaTiles; ++r)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) red[((warp - 1) * N + (r * NT + j) * 4 + i) * 32 + lane] = acc[r][j][i];
  }
  __syncthreads();
  if (warp != 0) return;
  for (int w = 1; w < warps; ++w)
#pragma unroll
    for (int r = 0; r < kMmaTiles; ++r)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[r][j][i] += red[((w - 1) * N + (r * NT + j) * 4 + i) * 32 + lane];
}

// Whether the tensor-core kernels take this weight: bf16 dense or a quantized format with
// power-of-two MXFP4 scales, inputs a whole number of 16-byte segments, 16-byte aligned
// weights and activations, FP8 blocks not split by a 16-row m-tile (m-tiles start every 16
// rows of the matrix, or of each group's rows).
inline bool mma_rows_supported(const WeightRef& w, const void* x, int64_t groups) {
  int values = 0;
  switch (w.format) {
    case WeightFormat::dense: values = w.weight_dtype == DType::bf16 ? 8 : 0; break;
    case WeightFormat::fp8_block: values = groups == 1 || (w.out / groups) % 16 == 0 ? 16 : 0; break;
    case WeightFormat::fp8_tensor: values = 16; break;
    case WeightFormat::mxfp4: values = w.scale_dtype == DType::f8_e8m0 ? 32 : 0; break;
    case WeightFormat::nvfp4: values = 32; break;
  }
  return values > 0 && w.in % values == 0 && reinterpret_cast<uintptr_t>(w.weight) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

// Chunks of a row (64 bytes each) for format f.
inline int mma_chunks(WeightFormat f, int64_t in) {
  const int chunk = f == WeightFormat::mxfp4 || f == WeightFormat::nvfp4                        ? 128
                    : f == WeightFormat::fp8_block || f == WeightFormat::fp8_tensor ? 64
                                                                                                : 32;
  return int((in + chunk - 1) / chunk);
}

}  // namespace tetra::cuda
