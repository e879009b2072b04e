#include "backend/cuda/expert_gemm.h"

#include <cuda_bf16.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/expert_tiles.cuh"
#include "backend/cuda/expert_wgmma.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_rows.cuh"
#include "backend/cuda/pool_buffer.h"
#include "backend/cuda/shared_tiles.cuh"
#include "backend/cuda/swiglu.cuh"

namespace tetra::cuda {
namespace {

constexpr int kTileRows = 64;                   // sorted rows of one expert per CTA: four m-tiles
constexpr int kMTiles = kTileRows / 16;
constexpr int kNTiles = 8;                      // per warp: eight n-tiles of 8 weight rows
constexpr int kWarpCols = 8 * kNTiles;
constexpr int kStageK = 128;                    // inputs per pipeline stage: 8 mma k-steps
constexpr int kInputRowBytes = 2 * kStageK;     // a tile row's bf16 inputs per stage
constexpr int kInputUnits = kInputRowBytes / 16;

// A CTA per format: its warps and weight rows, and its shared memory per pipeline stage (the
// tile's inputs, the weight rows' codes and their scales).
template <WeightFormat F>
struct Tiling {
  using C = MmaCodes<F>;
  // bf16 weights take four times the shared memory of fp4 ones: half the warps
  static constexpr int warps = F == WeightFormat::dense ? 4 : 8;
  static constexpr int threads = 32 * warps;
  static constexpr int cols = warps * kWarpCols;  // weight rows per CTA
  static constexpr int stages = C::fp4 ? 3 : 2;
  static constexpr int weight_units = int(C::row_bytes(kStageK)) / 16;  // per row and stage: 4, 8 or 16
  static constexpr int scale_bytes = F == WeightFormat::nvfp4 ? kStageK / 16 : F == WeightFormat::mxfp4 ? kStageK / 32 : 0;
  static constexpr int input_bytes = kTileRows * kInputRowBytes;
  static constexpr int weight_bytes = cols * weight_units * 16;
  static constexpr int stage_bytes = input_bytes + weight_bytes + cols * scale_bytes;
  // after the stages: per column its weight and scale rows, per tile row its input row
  static constexpr int table_bytes = cols * 2 * 8 + kTileRows * 8;
  static_assert(weight_units / 4 * C::steps == kStageK / 16, "a lane's segments cover the stage's k-steps");
};

template <WeightFormat F>
size_t shared_bytes(int64_t in) {
  using T = Tiling<F>;
  const size_t block_scales = F == WeightFormat::fp8_block ? size_t(in / kStageK) * 4 * sizeof(float) : 0;
  return size_t(T::stages) * T::stage_bytes + T::table_bytes + block_scales;
}

// Position p of every group of 8 bf16 inputs holds input input_at<F>(p): each 32-bit word is
// then the pair that one decoded weight pair multiplies (bf16_codes.cuh: fp4 nibbles n and n+4
// of a word, fp8 bytes 0 and 2 or 1 and 3, bf16 in order).
template <WeightFormat F>
__host__ __device__ constexpr int input_at(int p) {
  if (MmaCodes<F>::fp4) return (p % 2) * 4 + p / 2;
  if (MmaCodes<F>::fp8) return (p & 4) | ((p & 1) << 1) | ((p >> 1) & 1);
  return p;
}

// Where 16-byte unit u of a shared row of `Units` units lies. Lane (g, t) reads units
// (Units / 4)·t + i of rows g and g + 8 (the same i across the warp); the XOR puts the eight
// lanes of each quarter-warp on distinct banks.
template <int Units>
__device__ __forceinline__ int swizzle(int row, int u) {
  if constexpr (Units == 16) return u ^ ((u >> 2) & 2) ^ (row & 1);
  else if constexpr (Units == 8) return u ^ (row & 1);
  else return u;  // 64-byte rows: rows g and g + 1 already fall on different bank halves
}

__device__ __forceinline__ uint32_t word(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

__device__ __forceinline__ uint32_t bf16_splat(float v) { return bf16x2_pack(v, v); }

// One stage (kStageK inputs) of a warp's 64 tile rows × 64 weight rows. factor / second: each
// n-tile's bf16x2 multipliers (NVFP4: refreshed here per 16 inputs); Second: apply `second`.
template <WeightFormat F, bool Second>
__device__ __forceinline__ void stage_mma(const uint8_t* inputs, const uint8_t* weights, const uint8_t* scales,
                                          uint32_t (&factor)[kNTiles], const uint32_t (&second)[kNTiles], int active,
                                          int warp, int g, int t, float (&acc)[kMTiles][kNTiles][4]) {
  using T = Tiling<F>;
  using C = MmaCodes<F>;
  constexpr int kUnits = T::weight_units;
  // Lane (g, t) takes inputs 32t .. 32t + 31 of the stage: per weight row (g of each n-tile) its
  // 16-byte segments of them (1, 2 or 4), per tile row (g, g + 8 of each m-tile) the matching
  // bf16 words, two k-steps per 16-byte unit.
  const int swizzled = (t & 2) ^ (g & 1);  // swizzle<16> of this lane's input units, less 4t
  const uint8_t* lane_inputs = inputs + g * kInputRowBytes + 64 * t;
  const uint8_t* lane_weights = weights + (kWarpCols * warp + g) * kUnits * 16;
  uint4 raw[kNTiles];
  uint4 a[kMTiles][2];
#pragma unroll
  for (int s = 0; s < kStageK / 16; ++s) {
    const int step = s % C::steps;  // k-step inside the current segment
    if (step == 0) {
      const int unit = swizzle<kUnits>(g, kUnits / 4 * t + s / C::steps);
#pragma unroll
      for (int j = 0; j < kNTiles; ++j)
        raw[j] = *reinterpret_cast<const uint4*>(lane_weights + (8 * j * kUnits + unit) * 16);
    }
    if constexpr (F == WeightFormat::nvfp4) {
      if (s % 4 == 0) {  // one e4m3 scale per 16 inputs: 2t, then 2t + 1
#pragma unroll
        for (int j = 0; j < kNTiles; ++j)
          factor[j] = nvfp4_factor(decode_e4m3(scales[(kWarpCols * warp + 8 * j + g) * T::scale_bytes + 2 * t + s / 4]));
      }
    }
    if (s % 2 == 0) {
      const uint8_t* p = lane_inputs + 16 * ((s / 2) ^ swizzled);
#pragma unroll
      for (int m = 0; m < kMTiles; ++m)
        if (m < active) {
          a[m][0] = *reinterpret_cast<const uint4*>(p + 16 * m * kInputRowBytes);
          a[m][1] = *reinterpret_cast<const uint4*>(p + (16 * m + 8) * kInputRowBytes);
        }
    }
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) {
      uint2 b = code_pairs<F>(raw[j], step);
      if constexpr (F != WeightFormat::dense) {
        b.x = bf16x2_mul(b.x, factor[j]);
        b.y = bf16x2_mul(b.y, factor[j]);
        if constexpr (Second) {
          b.x = bf16x2_mul(b.x, second[j]);
          b.y = bf16x2_mul(b.y, second[j]);
        }
      }
#pragma unroll
      for (int m = 0; m < kMTiles; ++m)
        if (m < active) {
          // words 2(s % 2) and 2(s % 2) + 1 of the unit: the k-step's low and high pairs
          const int lo = 2 * (s % 2);
          const uint32_t frag[4] = {word(a[m][0], lo), word(a[m][1], lo), word(a[m][0], lo + 1), word(a[m][1], lo + 1)};
          mma_bf16(acc[m][j], frag, b.x, b.y);
        }
    }
  }
}

// One CTA: row tile blockIdx.x / col_tiles (64 sorted rows of one expert) × weight block
// blockIdx.x % col_tiles. Up: 32·warps outputs of w1 and of w3 (n-tiles 0-3 and 4-7 of each
// warp, the same outputs), SwiGLU, h in bf16; down: 64·warps outputs of w2, f32.
template <WeightFormat F, bool Up>
__global__ void __launch_bounds__(Tiling<F>::threads) expert_gemm_kernel(ExpertPass p) {
  using T = Tiling<F>;
  using C = MmaCodes<F>;
  extern __shared__ __align__(16) uint8_t smem[];
  const int4 tile = p.tiles[blockIdx.x / p.col_tiles];
  if (tile.x < 0) return;  // past the last tile: the grid is sized for the worst case
  const int expert = tile.x, row0 = tile.y, rows = tile.z;
  const int64_t col0 = int64_t(blockIdx.x % p.col_tiles) * (Up ? T::cols / 2 : T::cols);  // first output
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const WeightRef* wa = p.wa + expert;
  const WeightRef* wb = Up ? p.wb + expert : wa;

  const uint8_t** col_weight = reinterpret_cast<const uint8_t**>(smem + T::stages * T::stage_bytes);
  const uint8_t** col_scale = col_weight + T::cols;
  const __nv_bfloat16** row_input = reinterpret_cast<const __nv_bfloat16**>(col_scale + T::cols);
  float* block_scale = reinterpret_cast<float*>(row_input + kTileRows);  // FP8 blocks: [in / 128][4]

  for (int c = tid; c < T::cols; c += T::threads) {
    // Up: warp block c / 64 computes 32 outputs, its n-tiles 0-3 from w1 and 4-7 from w3, the
    // columns of an n-tile in the k order of h (lanes then store h in pairs); down: output c.
    const int j = c / 8 % kNTiles;
    const WeightRef* w = Up && j >= kNTiles / 2 ? wb : wa;
    const int64_t row =
        Up ? col0 + 32 * (c / kWarpCols) + 8 * (j % (kNTiles / 2)) + input_at<F>(c % 8) : col0 + c;
    const bool valid = row < p.out;
    col_weight[c] = valid ? static_cast<const uint8_t*>(w->weight) + row * C::row_bytes(p.in) : nullptr;
    if constexpr (T::scale_bytes > 0)
      col_scale[c] = valid ? static_cast<const uint8_t*>(w->scale) + row * (p.in / (T::scale_bytes == 8 ? 16 : 32))
                           : nullptr;
  }
  for (int r = tid; r < kTileRows; r += T::threads)
    row_input[r] = r < rows ? p.input + (Up ? int64_t(p.order[row0 + r]) / p.k : int64_t(row0 + r)) * p.in : nullptr;
  if constexpr (F == WeightFormat::fp8_block) {
    // the CTA's rows span four 128-row blocks: two per matrix (up), four of w2 (down)
    static_assert(T::cols == 512, "four FP8 row blocks per CTA");
    const int64_t stages = p.in / kStageK, blocks_per_row = (p.in + 127) / 128;
    for (int64_t i = tid; i < stages * 4; i += T::threads) {
      const int local = int(i % 4);
      const WeightRef* w = Up && local >= 2 ? wb : wa;
      const int64_t first = col0 + 128 * (Up ? local % 2 : local), index = first / 128 * blocks_per_row + i / 4;
      block_scale[i] = first >= p.out                ? 0.0f
                       : w->scale_dtype == DType::f32 ? static_cast<const float*>(w->scale)[index]
                                                      : decode_e8m0(static_cast<const uint8_t*>(w->scale)[index]);
    }
  }
  __syncthreads();

  // Copies per thread and stage: units tid + it·threads of the inputs, of the weight codes and
  // (fp4) of the scales. Rows advance by an even count per `it`, so each thread's swizzle stays
  // put and its destinations step by threads·16 bytes.
  static_assert(kTileRows * kInputUnits % T::threads == 0 && T::cols * T::weight_units % T::threads == 0 &&
                T::cols % T::threads == 0 && T::threads / kInputUnits % 2 == 0 && T::threads / T::weight_units % 2 == 0);
  const int input_unit = tid % kInputUnits, input_row = tid / kInputUnits;
  const int input_at_thread = input_row * kInputRowBytes + swizzle<kInputUnits>(input_row, input_unit) * 16;
  const int weight_unit = tid % T::weight_units, weight_col = tid / T::weight_units;
  const int weight_at_thread = (weight_col * T::weight_units + swizzle<T::weight_units>(weight_col, weight_unit)) * 16;
  auto load_stage = [&](int buffer, int stage) {
    uint8_t* in_s = smem + buffer * T::stage_bytes;
    uint8_t* w_s = in_s + T::input_bytes;
    uint8_t* s_s = w_s + T::weight_bytes;
#pragma unroll
    for (int it = 0; it < kTileRows * kInputUnits / T::threads; ++it) {
      const __nv_bfloat16* src = row_input[input_row + it * (T::threads / kInputUnits)];
      cp_async_16(shared_address(in_s + input_at_thread + it * T::threads * 16),
                  src ? src + int64_t(stage) * kStageK + input_unit * 8 : p.input, src != nullptr);
    }
#pragma unroll
    for (int it = 0; it < T::cols * T::weight_units / T::threads; ++it) {
      const uint8_t* src = col_weight[weight_col + it * (T::threads / T::weight_units)];
      cp_async_16(
          shared_address(w_s + weight_at_thread + it * T::threads * 16),
          src ? src + int64_t(stage) * C::row_bytes(kStageK) + weight_unit * 16 : static_cast<const void*>(p.input),
          src != nullptr);
    }
    if constexpr (T::scale_bytes > 0) {
#pragma unroll
      for (int it = 0; it < T::cols / T::threads; ++it) {
        const uint8_t* src = col_scale[tid + it * T::threads];
        cp_async_small<T::scale_bytes>(shared_address(s_s + (tid + it * T::threads) * T::scale_bytes),
                                       src ? src + int64_t(stage) * T::scale_bytes : static_cast<const void*>(p.input),
                                       src != nullptr);
      }
    }
  };

  const int stages = int(p.in / kStageK), active = (rows + 15) / 16;
  float acc[kMTiles][kNTiles][4] = {};
#pragma unroll
  for (int s = 0; s < T::stages - 1; ++s) {
    if (s < stages) load_stage(s, s);
    cp_async_commit();  // one group per stage, empty or not: the waits count groups
  }
  for (int stage = 0; stage < stages; ++stage) {
    cp_async_wait<T::stages - 2>();  // this thread's copies of `stage` have landed ...
    __syncthreads();                 // ... everyone's, and every warp is done with the buffer refilled below
    const int next = stage + T::stages - 1;
    if (next < stages) load_stage(next % T::stages, next);
    cp_async_commit();
    const uint8_t* in_s = smem + (stage % T::stages) * T::stage_bytes;
    const uint8_t* w_s = in_s + T::input_bytes;
    const uint8_t* s_s = w_s + T::weight_bytes;
    uint32_t factor[kNTiles], second[kNTiles];
    if constexpr (F == WeightFormat::mxfp4) {
      // one ue8m0 scale per 32 inputs: the lane's; above 2 (bytes past 128) they take two factors
      bool large = false;
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
        const uint8_t b = s_s[(kWarpCols * warp + 8 * j + g) * T::scale_bytes + t];
        large |= b > 128;
        factor[j] = b > 128 ? bf16x2_splat(kFp4Bias) : mxfp4_factor(b);
        second[j] = b > 128 ? mxfp4_large_scale(b) : bf16x2_splat(0x3F80);
      }
      if (__any_sync(0xFFFFFFFFu, large)) stage_mma<F, true>(in_s, w_s, s_s, factor, second, active, warp, g, t, acc);
      else stage_mma<F, false>(in_s, w_s, s_s, factor, second, active, warp, g, t, acc);
    } else if constexpr (F == WeightFormat::fp8_block) {
      // the exact code, then its block's scale (rounded to bf16: exact for powers of two)
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
        factor[j] = bf16x2_splat(kFp8Bias);
        second[j] = bf16_splat(block_scale[stage * 4 + (Up ? 2 * (j / (kNTiles / 2)) + warp / 4 : warp / 2)]);
      }
      stage_mma<F, true>(in_s, w_s, s_s, factor, second, active, warp, g, t, acc);
    } else {
      // fp8_tensor: the bias only (its scale multiplies the accumulators); NVFP4 sets its own; bf16 has none
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) factor[j] = second[j] = bf16x2_splat(kFp8Bias);
      stage_mma<F, false>(in_s, w_s, s_s, factor, second, active, warp, g, t, acc);
    }
  }
  cp_async_wait<0>();

  // Lane (g, t) holds, per m-tile and n-tile, rows g and g + 8 × columns 2t and 2t + 1.
  if constexpr (Up) {
    const float s1 = output_scale<F>(*wa), s3 = output_scale<F>(*wb);
    auto* h = static_cast<__nv_bfloat16*>(p.result);
#pragma unroll
    for (int m = 0; m < kMTiles; ++m)
#pragma unroll
      for (int j = 0; j < kNTiles / 2; ++j)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int r = 16 * m + g + 8 * half;
          const int64_t o = col0 + 32 * warp + 8 * j + 2 * t;  // h position of columns 2t, 2t + 1
          if (r >= rows || o >= p.out) continue;
          float v[2];
#pragma unroll
          for (int i = 0; i < 2; ++i)
            v[i] = clamped_swiglu(acc[m][j][2 * half + i] * s1, acc[m][j + kNTiles / 2][2 * half + i] * s3, p.limit);
          *reinterpret_cast<__nv_bfloat162*>(h + int64_t(row0 + r) * p.out + o) = __floats2bfloat162_rn(v[0], v[1]);
        }
  } else {
    const float s2 = output_scale<F>(*wa);
    auto* y = static_cast<float*>(p.result);
#pragma unroll
    for (int m = 0; m < kMTiles; ++m)
#pragma unroll
      for (int j = 0; j < kNTiles; ++j)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int r = 16 * m + g + 8 * half;
          const int64_t d = col0 + kWarpCols * warp + 8 * j + 2 * t;
          if (r >= rows || d >= p.out) continue;
          *reinterpret_cast<float2*>(y + int64_t(row0 + r) * p.out + d) =
              make_float2(acc[m][j][2 * half] * s2, acc[m][j][2 * half + 1] * s2);
        }
  }
}

// out = bf16(x), each group of 8 in the k order of format F (x 16-byte aligned, groups whole).
template <WeightFormat F>
__global__ void input_order_kernel(const float* x, int64_t groups, __nv_bfloat16* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < groups; i += int64_t(gridDim.x) * blockDim.x) {
    const float4 lo = reinterpret_cast<const float4*>(x)[2 * i], hi = reinterpret_cast<const float4*>(x)[2 * i + 1];
    const float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    reinterpret_cast<uint4*>(out)[i] =
        make_uint4(bf16x2_pack(v[input_at<F>(0)], v[input_at<F>(1)]), bf16x2_pack(v[input_at<F>(2)], v[input_at<F>(3)]),
                   bf16x2_pack(v[input_at<F>(4)], v[input_at<F>(5)]), bf16x2_pack(v[input_at<F>(6)], v[input_at<F>(7)]));
  }
}

template <WeightFormat F, bool Up>
void launch(const ExpertPass& p, int64_t row_tiles, cudaStream_t stream) {
  const size_t bytes = shared_bytes<F>(p.in);
  allow_shared_bytes(expert_gemm_kernel<F, Up>, bytes);
  expert_gemm_kernel<F, Up><<<unsigned(row_tiles * p.col_tiles), Tiling<F>::threads, bytes, stream>>>(p);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

template <WeightFormat F>
void run(const ExpertGemmArgs& a, const float* x, int64_t n, int64_t k, const int32_t* order, const int32_t* offsets,
         float limit, float* y, cudaStream_t stream) {
  using T = Tiling<F>;
  const int64_t pairs = n * k;
  const int64_t row_tiles = expert_tile_bound(pairs, a.experts, kTileRows);
  PoolBuffer tiles(size_t(row_tiles) * sizeof(int4), stream), inputs(size_t(n * a.dim) * 2, stream),
      h(size_t(pairs * a.inter) * 2, stream);
  expert_tiles_kernel<kTileRows><<<1, 32, 0, stream>>>(offsets, a.experts, row_tiles, tiles.get<int4>());
  TETRA_CUDA_CHECK(cudaGetLastError());
  const int64_t groups = n * a.dim / 8;
  input_order_kernel<F><<<unsigned(std::clamp<int64_t>((groups + 255) / 256, 1, 65536)), 256, 0, stream>>>(
      x, groups, inputs.get<__nv_bfloat16>());
  TETRA_CUDA_CHECK(cudaGetLastError());
  const int up_cols = T::cols / 2;
  launch<F, true>(ExpertPass{inputs.get<__nv_bfloat16>(), order, k, tiles.get<int4>(),
                             int((a.inter + up_cols - 1) / up_cols), a.w1, a.w3, a.dim, a.inter, limit, h.get()},
                  row_tiles, stream);
  launch<F, false>(ExpertPass{h.get<__nv_bfloat16>(), nullptr, 1, tiles.get<int4>(),
                              int((a.dim + T::cols - 1) / T::cols), a.w2, a.w2, a.inter, a.dim, limit, y},
                   row_tiles, stream);
}

bool format_supported(const WeightRef& w) {
  switch (w.format) {
    case WeightFormat::dense: return w.weight_dtype == DType::bf16;
    case WeightFormat::fp8_block: return w.scale_dtype == DType::f32 || w.scale_dtype == DType::f8_e8m0;
    case WeightFormat::fp8_tensor: return true;
    case WeightFormat::mxfp4: return w.scale_dtype == DType::f8_e8m0;
    case WeightFormat::nvfp4: return true;
  }
  return false;
}

size_t shared_bytes(WeightFormat f, int64_t in) {
  switch (f) {
    case WeightFormat::dense: return shared_bytes<WeightFormat::dense>(in);
    case WeightFormat::fp8_block: return shared_bytes<WeightFormat::fp8_block>(in);
    case WeightFormat::fp8_tensor: return shared_bytes<WeightFormat::fp8_tensor>(in);
    case WeightFormat::mxfp4: return shared_bytes<WeightFormat::mxfp4>(in);
    case WeightFormat::nvfp4: return shared_bytes<WeightFormat::nvfp4>(in);
  }
  return 0;
}

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

bool expert_gemm_supported(const ExpertLayout& layout, int64_t experts, const WeightRef* w1, const WeightRef* w2,
                           const WeightRef* w3, const float* x) {
  const WeightRef &up = layout.up, &down = layout.down;
  const int64_t dim = up.in, inter = up.out;
  if (!layout.uniform || up.format != down.format || !format_supported(up) || !format_supported(down) ||
      down.in != inter || down.out != dim || dim % kStageK != 0 || inter % kStageK != 0 || !aligned(x, 16))
    return false;
  int device = 0, limit = 0;
  TETRA_CUDA_CHECK(cudaGetDevice(&device));
  TETRA_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (shared_bytes(up.format, std::max(dim, inter)) > size_t(limit)) return false;
  // cp.async sources: 16-byte code segments, 8 (NVFP4) or 4 (MXFP4) scale bytes per stage
  const uintptr_t scale_alignment = up.format == WeightFormat::nvfp4 ? 8 : up.format == WeightFormat::mxfp4 ? 4 : 1;
  for (int64_t e = 0; e < experts; ++e)
    for (const WeightRef* w : {&w1[e], &w2[e], &w3[e]})
      if (!aligned(w->weight, 16) || !aligned(w->scale, scale_alignment)) return false;
  return true;
}

void expert_gemms(const ExpertGemmArgs& a, const float* x, int64_t n, int64_t k, const int32_t* order,
                  const int32_t* offsets, float limit, float* y, cudaStream_t stream) {
  if (n * k == 0) return;
  if (expert_wgmma_supported(a.format, a.dim, a.inter))
    return expert_wgmma_gemms(a, x, n, k, order, offsets, limit, y, stream);
  switch (a.format) {
    case WeightFormat::dense: run<WeightFormat::dense>(a, x, n, k, order, offsets, limit, y, stream); break;
    case WeightFormat::fp8_block: run<WeightFormat::fp8_block>(a, x, n, k, order, offsets, limit, y, stream); break;
    case WeightFormat::fp8_tensor: run<WeightFormat::fp8_tensor>(a, x, n, k, order, offsets, limit, y, stream); break;
    case WeightFormat::mxfp4: run<WeightFormat::mxfp4>(a, x, n, k, order, offsets, limit, y, stream); break;
    case WeightFormat::nvfp4: run<WeightFormat::nvfp4>(a, x, n, k, order, offsets, limit, y, stream); break;
  }
}

}  // namespace tetra::cuda
