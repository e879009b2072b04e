#include "backend/cuda/expert_wgmma.h"

#include <cuda_bf16.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/expert_tiles.cuh"
#include "backend/cuda/formats.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_rows.cuh"
#include "backend/cuda/pool_buffer.h"
#include "backend/cuda/shared_tiles.cuh"
#include "backend/cuda/swiglu.cuh"
#include "backend/cuda/wgmma.cuh"

namespace tetra::cuda {
namespace {

constexpr int kTokens = 128;  // sorted rows of one expert per CTA: the products' n
constexpr int kStageK = 128;  // inputs per pipeline stage: 8 k-steps, 64 fp4 bytes of a weight row
constexpr int kSteps = kStageK / 16;
// The activations' ring in shared memory: the copies of a stage run kAhead stages ahead of its
// products, into the buffer the two warpgroups finished with kStages - kAhead stages before, so a
// warpgroup may run up to a stage ahead of the other without waiting for it.
constexpr int kStages = 6;
constexpr int kAhead = kStages - 3;
constexpr int kThreads = 256;              // two warpgroups, each two 64-row weight slabs
constexpr int kHalfBytes = kTokens * 128;  // 64 inputs of every token: one 128-byte swizzled row each
constexpr int kStageBytes = 2 * kHalfBytes;
// the ring, the tile's input rows, then a full and an empty barrier per buffer
constexpr size_t kSharedBytes = 1024 + size_t(kStages) * kStageBytes + kTokens * sizeof(void*) + 2 * kStages * 8;
constexpr int kUpOutputs = 128;    // per CTA: 64 outputs of w1 and w3 per warpgroup
constexpr int kDownOutputs = 256;  // per CTA: 128 rows of w2 per warpgroup

// Position p of every group of 128 inputs holds input input_at(p). A lane (g, t) holds the 32
// codes 32t .. 32t + 31 of a row's 128 (16 bytes), and k-step s of the products takes fp4_pair
// (nibbles n, n + 4) of its word s / 2 with n = 2(s % 2) for mma slots 2t, 2t + 1 and n + 1 for
// slots 2t + 8, 2t + 9: the activations are laid out to meet those codes.
__host__ __device__ constexpr int input_at(int p) {
  const int s = p / 16, q = p % 16;
  return 32 * (q % 8 / 2) + 8 * (s / 2) + 2 * (s % 2) + q / 8 + 4 * (q % 2);
}
// Where input i of a group lies (the inverse of input_at).
__host__ __device__ constexpr int position_of(int i) {
  const int t = i / 32, word = i % 32 / 8, e = i % 8 / 4, n = i % 4;
  return 16 * (2 * word + n / 2) + 8 * (n % 2) + 2 * t + e;
}
constexpr bool inverse_holds() {
  for (int i = 0; i < kStageK; ++i)
    if (input_at(position_of(i)) != i) return false;
  return true;
}
static_assert(inverse_holds(), "position_of inverts input_at");

// Whether any thread of warpgroup wg has p (a barrier of its 128 threads, id 1 + wg).
__device__ __forceinline__ bool warpgroup_any(bool p, int wg) {
  uint32_t any;
  asm volatile(
      "{\n.reg .pred in, out;\n"
      "setp.ne.u32 in, %1, 0;\n"
      "bar.red.or.pred out, %2, 128, in;\n"
      "selp.u32 %0, 1, 0, out;\n"
      "}\n"
      : "=r"(any)
      : "r"(uint32_t(p)), "r"(1 + wg)
      : "memory");
  return any != 0;
}

// A lane's codes and scales of one stage: per slab, rows g and g + 8 of its warp's 16.
template <WeightFormat F>
struct StageCodes {
  uint4 raw[2][2];
  uint32_t scales[2][2];  // MXFP4: the lane's ue8m0 byte; NVFP4: its two e4m3 bytes
};

template <WeightFormat F>
__device__ __forceinline__ void load_codes(StageCodes<F>& c, const uint8_t* const (&rows)[2][2],
                                           const uint8_t* const (&scales)[2][2], int stage, int t) {
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (!rows[m][h]) {
        c.raw[m][h] = make_uint4(0, 0, 0, 0);
        c.scales[m][h] = 0;
        continue;
      }
      c.raw[m][h] = load_streaming(rows[m][h] + int64_t(stage) * (kStageK / 2) + 16 * t);
      if constexpr (F == WeightFormat::mxfp4)
        c.scales[m][h] = __ldg(scales[m][h] + int64_t(stage) * 4 + t);
      else
        c.scales[m][h] = __ldg(reinterpret_cast<const uint16_t*>(scales[m][h] + int64_t(stage) * 8 + 2 * t));
    }
}

// One stage's eight k-steps for both slabs: the lane's codes become A fragments (rows g, g + 8 ×
// slots 2t, 2t + 1, 2t + 8, 2t + 9), each step's products read B from `stage_address`.
// Second: MXFP4 scales above 2 take a second factor.
template <WeightFormat F, int N, bool Second>
__device__ __forceinline__ void stage_products(const StageCodes<F>& c, uint32_t stage_address, float (&acc)[2][N / 2]) {
  uint32_t factor[2][2][2], second[2][2];  // [slab][row][half of the lane's 32 codes]
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if constexpr (F == WeightFormat::mxfp4) {
        const uint8_t b = uint8_t(c.scales[m][h]);
        factor[m][h][0] = factor[m][h][1] = b > 128 ? bf16x2_splat(kFp4Bias) : mxfp4_factor(b);
        second[m][h] = b > 128 ? mxfp4_large_scale(b) : bf16x2_splat(0x3F80);
      } else {
        nvfp4_factors(c.scales[m][h], factor[m][h][0], factor[m][h][1]);
        second[m][h] = 0;
      }
    }
  const uint32_t stage_low = swizzle128_low_word(stage_address);
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    uint32_t a[2][4];
#pragma unroll
    for (int m = 0; m < 2; ++m) {
      uint2 rows[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        rows[h] = code_pairs<F>(c.raw[m][h], s);
        const uint32_t f = factor[m][h][s / 4];
        rows[h].x = bf16x2_mul(rows[h].x, f);
        rows[h].y = bf16x2_mul(rows[h].y, f);
        if constexpr (Second) {
          rows[h].x = bf16x2_mul(rows[h].x, second[m][h]);
          rows[h].y = bf16x2_mul(rows[h].y, second[m][h]);
        }
      }
      a[m][0] = rows[0].x;
      a[m][1] = rows[1].x;
      a[m][2] = rows[0].y;
      a[m][3] = rows[1].y;
    }
    const uint64_t b = swizzle128_descriptor_at(stage_low, (s / 4) * kHalfBytes + (s % 4) * 32);
    wgmma_fence();
    wgmma_bf16<N>(acc[0], a[0], b);
    wgmma_bf16<N>(acc[1], a[1], b);
    wgmma_commit();
    wgmma_wait<1>();  // the previous step's products are done with their A registers
  }
}

// What a CTA's warpgroups share: the tile, the shared memory, the lane's weight rows.
struct Block {
  uint8_t* smem;  // the ring, 1024-byte aligned, then the tile's input rows
  uint32_t base;  // its shared-memory address
  // Barrier arrays (8 bytes a buffer): full[i] completes a phase when every thread's copies into
  // buffer i have landed; empty[i] when both warpgroups' products have read it.
  uint32_t full, empty;
  const __nv_bfloat16* const* row_input;
  int row0, rows, tid, wg, warp, g, t;
  int64_t col0;
  const WeightRef *wa, *wb;
  const uint8_t* code_rows[2][2];  // slab m, row g + 8h of the warp's 16 (null past the matrix end)
  const uint8_t* scale_rows[2][2];
};

// The products of a tile of up to N rows, then its epilogue. Lane (g, t) ends with, in
// acc[m][4j + 2h + e], row 16·warp + g + 8h of slab m × token 8j + 2t + e.
template <WeightFormat F, bool Up, int N>
__device__ __forceinline__ void tile_gemm(const ExpertPass& p, const Block& b) {
  // B copies: thread tid moves 16-byte unit tid % 16 of token rows tid / 16 + 16i (N / 16 a
  // stage); unit u of a row lands in half u / 8, swizzled by the row.
  const int unit = b.tid % 16, token0 = b.tid / 16;
  const uint32_t copy_offset = (unit / 8) * kHalfBytes + token0 * 128 + ((unit % 8) ^ (token0 % 8)) * 16;
  auto load_inputs = [&](int buffer, int stage) {
#pragma unroll
    for (int i = 0; i < N / 16; ++i) {
      const __nv_bfloat16* src = b.row_input[token0 + 16 * i];
      cp_async_16(b.base + buffer * kStageBytes + copy_offset + i * 16 * 128,
                  src ? src + int64_t(stage) * kStageK + unit * 8 : p.input, src != nullptr);
    }
  };

  const int stages = int(p.in / kStageK);
  auto fill = [&](int stage) {
    const int buffer = stage % kStages;
    if (stage >= kStages) mbarrier_wait(b.empty + 8 * buffer, (stage / kStages - 1) & 1);
    load_inputs(buffer, stage);
    cp_async_arrive(b.full + 8 * buffer);
  };
  for (int s = 0; s < kAhead && s < stages; ++s) fill(s);
  float acc[2][N / 2];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) acc[m][i] = 0.0f;
  StageCodes<F> next;
  load_codes<F>(next, b.code_rows, b.scale_rows, 0, b.t);
  for (int stage = 0; stage < stages; ++stage) {
    const StageCodes<F> codes = next;
    if (stage + 1 < stages) load_codes<F>(next, b.code_rows, b.scale_rows, stage + 1, b.t);
    bool large = false;
    if constexpr (F == WeightFormat::mxfp4)
#pragma unroll
      for (int m = 0; m < 2; ++m) large |= codes.scales[m][0] > 128 || codes.scales[m][1] > 128;
    if (stage + kAhead < stages) fill(stage + kAhead);
    mbarrier_wait(b.full + 8 * (stage % kStages), (stage / kStages) & 1);  // everyone's copies of `stage` landed ...
    fence_shared_for_async();  // ... and are visible to the tensor cores' reads
    // the warpgroup agrees on the MXFP4 decoder (its products are one instruction of 4 warps)
    if constexpr (F == WeightFormat::mxfp4) large = warpgroup_any(large, b.wg);
    const uint32_t stage_address = b.base + (stage % kStages) * kStageBytes;
    if (F == WeightFormat::mxfp4 && large)
      stage_products<F, N, true>(codes, stage_address, acc);
    else
      stage_products<F, N, false>(codes, stage_address, acc);
    // past its first step's wait, the warpgroup's products of stage - 1 are done: its buffer is free
    if (stage > 0 && b.tid % 128 == 0) mbarrier_arrive(b.empty + 8 * ((stage - 1) % kStages));
  }
  wgmma_wait<0>();
  wgmma_hold(acc[0]);
  wgmma_hold(acc[1]);

  if constexpr (Up) {
    __syncthreads();  // both warpgroups are done with the ring: it takes h's tile
    const float s1 = output_scale<F>(*b.wa), s3 = output_scale<F>(*b.wb);
    auto* tile_h = reinterpret_cast<__nv_bfloat16*>(b.smem);  // [N][128] in input_at order
#pragma unroll
    for (int j = 0; j < N / 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int i = 4 * j + 2 * h + e, token = 8 * j + 2 * b.t + e;
          const float v = clamped_swiglu(acc[0][i] * s1, acc[1][i] * s3, p.limit);
          tile_h[token * kUpOutputs + position_of(64 * b.wg + 16 * b.warp + b.g + 8 * h)] = __float2bfloat16_rn(v);
        }
    __syncthreads();
    auto* h = static_cast<__nv_bfloat16*>(p.result);
    for (int u = b.tid; u < N * kUpOutputs / 8; u += kThreads) {
      const int token = u / (kUpOutputs / 8), part = u % (kUpOutputs / 8);
      if (token < b.rows && b.col0 + 8 * part < p.out)
        *reinterpret_cast<uint4*>(h + int64_t(b.row0 + token) * p.out + b.col0 + 8 * part) =
            *reinterpret_cast<const uint4*>(tile_h + token * kUpOutputs + 8 * part);
    }
  } else {
    const float s2 = output_scale<F>(*b.wa);
    auto* y = static_cast<float*>(p.result);
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t d = b.col0 + 128 * b.wg + 64 * m + 16 * b.warp + b.g + 8 * h;
        if (d >= p.out) continue;
#pragma unroll
        for (int j = 0; j < N / 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int token = 8 * j + 2 * b.t + e;
            if (token < b.rows) y[int64_t(b.row0 + token) * p.out + d] = acc[m][4 * j + 2 * h + e] * s2;
          }
      }
  }
}

// Built for every architecture, run on compute capability 9.0 only (elsewhere wgmma traps).
// One CTA: row tile blockIdx.x / col_tiles (up to 128 sorted rows of one expert) × weight block
// blockIdx.x % col_tiles. Warpgroup w: up, outputs 64w .. 64w + 63 of the block from w1 (slab 0)
// and w3 (slab 1), SwiGLU, h in bf16; down, rows 128w .. 128w + 127 of w2, f32. A tile of up to
// 64 rows (an expert's last) takes products of 64 columns instead of 128.
template <WeightFormat F, bool Up>
__global__ void __launch_bounds__(kThreads, 1) expert_wgmma_kernel(ExpertPass p) {
  extern __shared__ __align__(16) uint8_t smem_raw[];
  const int4 tile = p.tiles[blockIdx.x / p.col_tiles];
  if (tile.x < 0) return;  // past the last tile: the grid is sized for the worst case
  Block b;
  const uint32_t raw_address = shared_address(smem_raw);
  b.smem = smem_raw + ((1024 - raw_address % 1024) % 1024);  // the swizzle needs 1024-byte alignment
  b.base = shared_address(b.smem);
  const int expert = tile.x;
  b.row0 = tile.y;
  b.rows = tile.z;
  b.tid = threadIdx.x;
  b.wg = b.tid / 128;
  b.warp = b.tid / 32 % 4;
  b.g = b.tid % 32 / 4;
  b.t = b.tid % 4;
  b.col0 = int64_t(blockIdx.x % p.col_tiles) * (Up ? kUpOutputs : kDownOutputs);
  b.wa = p.wa + expert;
  b.wb = Up ? p.wb + expert : b.wa;
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    const WeightRef* w = Up && m == 1 ? b.wb : b.wa;
    const int64_t slab = Up ? b.col0 + 64 * b.wg : b.col0 + 128 * b.wg + 64 * m;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = slab + 16 * b.warp + b.g + 8 * h;
      const bool valid = r < p.out;
      b.code_rows[m][h] = valid ? static_cast<const uint8_t*>(w->weight) + r * (p.in / 2) : nullptr;
      b.scale_rows[m][h] =
          valid ? static_cast<const uint8_t*>(w->scale) + r * (p.in / (F == WeightFormat::nvfp4 ? 16 : 32)) : nullptr;
    }
  }
  auto** row_input = reinterpret_cast<const __nv_bfloat16**>(b.smem + kStages * kStageBytes);
  b.full = shared_address(row_input + kTokens);
  b.empty = b.full + 8 * kStages;
  if (b.tid < kStages) {
    mbarrier_init(b.full + 8 * b.tid, kThreads);
    mbarrier_init(b.empty + 8 * b.tid, 2);
  }
  for (int r = b.tid; r < kTokens; r += kThreads)
    row_input[r] =
        r < b.rows ? p.input + (Up ? int64_t(p.order[b.row0 + r]) / p.k : int64_t(b.row0 + r)) * p.in : nullptr;
  b.row_input = row_input;
  __syncthreads();
  if (b.rows <= 64)
    tile_gemm<F, Up, 64>(p, b);
  else
    tile_gemm<F, Up, 128>(p, b);
}

// out = bf16(x) with every group of 128 in input_at order; a thread per 8 outputs.
__global__ void wgmma_input_kernel(const float* x, int64_t units, __nv_bfloat16* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < units; i += int64_t(gridDim.x) * blockDim.x) {
    const float* group = x + i / 16 * kStageK;
    const int p = int(i % 16) * 8;
    uint32_t v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = bf16x2_pack(group[input_at(p + 2 * j)], group[input_at(p + 2 * j + 1)]);
    reinterpret_cast<uint4*>(out)[i] = make_uint4(v[0], v[1], v[2], v[3]);
  }
}

template <WeightFormat F, bool Up>
void launch(const ExpertPass& p, int64_t row_tiles, cudaStream_t stream) {
  allow_shared_bytes(expert_wgmma_kernel<F, Up>, kSharedBytes);
  expert_wgmma_kernel<F, Up><<<unsigned(row_tiles * p.col_tiles), kThreads, kSharedBytes, stream>>>(p);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

template <WeightFormat F>
void run(const ExpertGemmArgs& a, const float* x, int64_t n, int64_t k, const int32_t* order, const int32_t* offsets,
         float limit, float* y, cudaStream_t stream) {
  const int64_t pairs = n * k, row_tiles = expert_tile_bound(pairs, a.experts, kTokens);
  PoolBuffer tiles(size_t(row_tiles) * sizeof(int4), stream), inputs(size_t(n * a.dim) * 2, stream),
      h(size_t(pairs * a.inter) * 2, stream);
  expert_tiles_kernel<kTokens><<<1, 32, 0, stream>>>(offsets, a.experts, row_tiles, tiles.get<int4>());
  TETRA_CUDA_CHECK(cudaGetLastError());
  const int64_t units = n * a.dim / 8;
  wgmma_input_kernel<<<unsigned(std::min<int64_t>((units + 255) / 256, 65536)), 256, 0, stream>>>(
      x, units, inputs.get<__nv_bfloat16>());
  TETRA_CUDA_CHECK(cudaGetLastError());
  launch<F, true>(ExpertPass{inputs.get<__nv_bfloat16>(), order, k, tiles.get<int4>(), int(a.inter / kUpOutputs), a.w1,
                             a.w3, a.dim, a.inter, limit, h.get()},
                  row_tiles, stream);
  launch<F, false>(ExpertPass{h.get<__nv_bfloat16>(), nullptr, 1, tiles.get<int4>(),
                              int((a.dim + kDownOutputs - 1) / kDownOutputs), a.w2, a.w2, a.inter, a.dim, limit, y},
                   row_tiles, stream);
}

}  // namespace

bool expert_wgmma_supported(WeightFormat format, int64_t dim, int64_t inter) {
  if ((format != WeightFormat::mxfp4 && format != WeightFormat::nvfp4) || dim % kStageK != 0 || inter % kStageK != 0)
    return false;
  int device = 0, major = 0, minor = 0, limit = 0;
  TETRA_CUDA_CHECK(cudaGetDevice(&device));
  TETRA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  TETRA_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  TETRA_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return major == 9 && minor == 0 && kSharedBytes <= size_t(limit);  // wgmma is sm_90a's alone
}

void expert_wgmma_gemms(const ExpertGemmArgs& a, const float* x, int64_t n, int64_t k, const int32_t* order,
                        const int32_t* offsets, float limit, float* y, cudaStream_t stream) {
  if (a.format == WeightFormat::mxfp4)
    run<WeightFormat::mxfp4>(a, x, n, k, order, offsets, limit, y, stream);
  else
    run<WeightFormat::nvfp4>(a, x, n, k, order, offsets, limit, y, stream);
}

}  // namespace tetra::cuda
