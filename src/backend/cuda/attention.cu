// Sparse attention with sinks over the paged state. V4 attention is multi-query: one key head
// shared by every query head, and the value is the key. Two kernels:
//   - exact (f32 numerics): a block per (row, head), every product and sum in f32;
//   - tensor cores (bf16 numerics): a block per (row, 64 heads; 16 for decode) walks the row's
//     keys in tiles of 64: each tile is copied once into shared memory (cp.async, a tile ahead), decoded once to
//     bf16 (exact for bf16 and fp8 rows), and serves every head through warpgroup MMA (sm_90a):
//     Sᵀ = K·Qᵀ with the keys as M, an f32 online softmax, Oᵀ += Kᵀ·Pᵀ (the same tile read
//     transposed, the dims as M). Rows of
//     short runs (decode) split their keys over blocks by a rule of the key count alone, and a
//     second kernel combines the splits in order: no float atomics, nothing depends on the batch.
#include <cuda_bf16.h>

#include <cstddef>
#include <type_traits>

#include "backend/cuda/attention_keys.cuh"
#include "backend/cuda/attention_splits.h"
#include "backend/cuda/bf16_codes.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/rope.cuh"
#include "backend/cuda/shared_tiles.cuh"
#include "backend/cuda/wgmma.cuh"

namespace tetra::cuda {
namespace {

constexpr int kMaxDim = 512;
constexpr float kLog2e = 1.4426950408889634f;

// ---- exact: f32 on the CUDA cores

constexpr int kWarps = 4;
constexpr int kMaxPerLane = kMaxDim / 32;

// One block per (row, head). Each warp runs an online softmax over every kWarps-th key, reading
// the key in its stored format once for the score and the weighted sum; the warps' partial
// results merge at the end with the sink in the denominator.
__global__ void __launch_bounds__(kWarps * 32)
    exact_attention_kernel(const float* q, AttentionKeys keys, const float* sinks, StepView at, int64_t begin,
                           AttentionParams p, float* out) {
  wait_for_inputs();
  __shared__ float part_m[kWarps], part_s[kWarps];
  __shared__ float part_acc[kWarps][kMaxPerLane * 32];
  const int64_t r = begin + blockIdx.x / p.heads, h = blockIdx.x % p.heads, d = p.d;
  float* o = out + (r * p.heads + h) * d;
  if (at.slot[r] < 0) {
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) o[i] = 0;
    return;
  }
  const KeyList list(keys, at, r, p.window, p.ratio);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const float* qh = q + (r * p.heads + h) * d;
  float qv[kMaxPerLane], acc[kMaxPerLane];
#pragma unroll
  for (int u = 0; u < kMaxPerLane; ++u) {
    const int64_t i = lane + 32 * u;
    qv[u] = i < d ? qh[i] : 0.0f;
    acc[u] = 0;
  }
  float m = -INFINITY, s = 0;
  for (int64_t j = warp; j < list.total(); j += kWarps) {
    const uint8_t* row = list.find(j);
    if (!row) continue;  // the same for the whole warp
    float kv[kMaxPerLane];
    float dot = 0;
#pragma unroll
    for (int u = 0; u < kMaxPerLane; ++u) {
      const int64_t i = lane + 32 * u;
      kv[u] = i < d ? stored_value(row, i, p.format, d, p.rope_dim) : 0.0f;
      dot = fmaf(qv[u], kv[u], dot);
    }
    const float z = warp_reduce_sum(dot) * p.scale;
    const float m_new = fmaxf(m, z), keep = expf(m - m_new), w = expf(z - m_new);
    s = s * keep + w;
#pragma unroll
    for (int u = 0; u < kMaxPerLane; ++u) acc[u] = fmaf(acc[u], keep, w * kv[u]);
    m = m_new;
  }
  if (lane == 0) {
    part_m[warp] = m;
    part_s[warp] = s;
  }
#pragma unroll
  for (int u = 0; u < kMaxPerLane; ++u) part_acc[warp][lane + 32 * u] = acc[u];
  __syncthreads();
  const float sink = sinks[h];
  float top = sink;
  for (int w = 0; w < kWarps; ++w) top = fmaxf(top, part_m[w]);
  float denom = expf(sink - top);
  for (int w = 0; w < kWarps; ++w) denom += part_s[w] * expf(part_m[w] - top);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float v = 0;
    for (int w = 0; w < kWarps; ++w) v += part_acc[w][i] * expf(part_m[w] - top);
    o[i] = v / denom;
  }
}

// ---- tensor cores

constexpr int kTcWarps = 8, kTcThreads = 32 * kTcWarps;
// Heads per block, the M dimension (G/16 m-tiles): 64 where there are rows enough to fill the
// GPU, so that every decoded key tile serves as many heads as possible; 16 for decode steps of
// up to kFewRows rows, whose few tiles then spread over 4× the blocks, each with a quarter of
// the q rows, mmas and output (64-head blocks took ~23 µs for one row's one or two tiles).
constexpr int kPrefillHeads = 64, kDecodeHeads = 16;
constexpr int64_t kFewRows = 8;
constexpr int kTileKeys = kAttentionTileKeys;  // keys per tile: S and P are [G heads, 64 keys]
constexpr int kDimChunks = kMaxDim / 8;  // 16-byte chunks of a bf16 row
constexpr int kStageBytes = 64 * 1024;  // stored key rows in flight: a tile of bf16 or fp8 rows, half a tile of f32
constexpr int kScoreStride = 68;        // floats per S row: the transposed fragments' stores hit distinct banks
// A row of short runs splits its key list into at most kMaxSplits blocks of whole tiles
// (attention_splits.h).
constexpr int64_t kMaxSplits = kAttentionMaxSplits;

// The bf16 tiles (q: G rows, keys: 64 rows, of up to 512 values; P: G rows of 64) in the layout
// warpgroup MMA reads (wgmma.cuh): 64-value column blocks of Rows 128-byte rows one after the
// other, 16-byte unit u of row r at unit u ^ (r % 8). ldmatrix's 8 rows of one unit, and a row's
// 8 units, each fall on all 32 banks once.
template <int Rows>
__device__ __forceinline__ uint32_t tile_chunk(int row, int chunk) {
  return uint32_t(chunk / 8) * (Rows * 128) + uint32_t(row) * 128 + (uint32_t((chunk % 8) ^ (row % 8)) << 4);
}

template <int G>
struct TcShared {
  uint4 q[G * kDimChunks];  // bf16 (tile_chunk<G>)
  uint4 keys[kTileKeys * kDimChunks];  // bf16 (tile_chunk<kTileKeys>)
  // Staged rows, slot_bytes apart; in a block whose keys all have bf16 copies (KeyList::
  // copies_only), the second key tile, which the copies fill while the products read the first.
  alignas(16) uint8_t stage[kStageBytes];
  uint4 probs[G * kTileKeys / 8];  // bf16 (tile_chunk<G>, one column block)
  float scores[G][kScoreStride];   // scaled by log2(e): the softmax runs in base 2
  float factor[G];                 // per head: the tile's rescale of O, at the end its normalization
  alignas(16) uint8_t stage_kind[kTileKeys];     // StagedKey per stage slot
  alignas(16) uint8_t tile_valid[2][kTileKeys];  // per key tile; read 16 at a time by the softmax threads
};
static_assert(kStageBytes == kTileKeys * kDimChunks * 16, "the stage holds a key tile");
// The tiles need 1024-byte alignment (the swizzle's pattern repeats every 8 rows of 128 bytes):
// the kernel rounds the dynamic shared memory's start up, so it asks for that much more.
template <int G>
constexpr size_t tc_shared_bytes() {
  return sizeof(TcShared<G>) + 1024;
}
static_assert(tc_shared_bytes<kPrefillHeads>() <= 227 * 1024, "above the opt-in shared memory of sm_90 and sm_100");
static_assert(offsetof(TcShared<kPrefillHeads>, keys) % 1024 == 0 && offsetof(TcShared<kPrefillHeads>, probs) % 1024 == 0 &&
                  offsetof(TcShared<kDecodeHeads>, keys) % 1024 == 0 && offsetof(TcShared<kDecodeHeads>, probs) % 1024 == 0 &&
                  offsetof(TcShared<kPrefillHeads>, stage) % 16 == 0 && offsetof(TcShared<kDecodeHeads>, stage) % 16 == 0,
              "tiles at 1024 bytes, stage rows at 16");

// Elements 8c .. 8c+7 (8c < d) of a stored row of format F as bf16 (exact for bf16 and fp8_kv,
// f32 rounded to nearest).
template <RowFormat F>
__device__ __forceinline__ uint4 bf16_chunk(const uint8_t* row, int c, int d, int rope_dim) {
  if constexpr (F == RowFormat::bf16) {
    return *reinterpret_cast<const uint4*>(row + 16 * c);
  } else if constexpr (F == RowFormat::fp8_kv) {
    const int nope = d - rope_dim;
    if (8 * c >= nope) {  // rope dims: bf16, 8-byte aligned
      const uint2* b = reinterpret_cast<const uint2*>(row + nope + 2 * (8 * c - nope));
      const uint2 lo = b[0], hi = b[1];
      return {lo.x, lo.y, hi.x, hi.y};
    }
    const uint2 codes = *reinterpret_cast<const uint2*>(row + 8 * c);
    const uint8_t e = row[nope + 2 * rope_dim + 8 * c / 64];
    // An e4m3 code's bits moved into a bf16 are its value times 2^-120 (subnormals too), so one
    // bf16 multiply by 2^(e-7) = 2^120·2^(e-127) rounds the exact product once, as the f32 path
    // below does; that path keeps the rare scales above 2^7 and NaN codes (0x7F, 0xFF: their low
    // seven bits plus one carry into bit 7, which no other code's do).
    const uint32_t nan_bits =
        (((codes.x & 0x7F7F7F7Fu) + 0x01010101u) | ((codes.y & 0x7F7F7F7Fu) + 0x01010101u)) & 0x80808080u;
    if (e < 135 && !nan_bits) {
      const uint32_t factor = bf16x2_splat(uint16_t((e + 120) << 7));
      return {bf16x2_mul(fp8_pair_low(codes.x), factor), bf16x2_mul(fp8_pair_high(codes.x), factor),
              bf16x2_mul(fp8_pair_low(codes.y), factor), bf16x2_mul(fp8_pair_high(codes.y), factor)};
    }
    const float scale = decode_e8m0(e);
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t word = i < 2 ? codes.x : codes.y;
      const int shift = 16 * (i % 2);
      w[i] = bf16x2_pack(decode_e4m3(uint8_t(word >> shift)) * scale, decode_e4m3(uint8_t(word >> (shift + 8))) * scale);
    }
    return {w[0], w[1], w[2], w[3]};
  } else {
    static_assert(F == RowFormat::f32, "the key rows' formats");
    const float4* v = reinterpret_cast<const float4*>(row + 32 * c);
    const float4 a = v[0], b = v[1];
    return {bf16x2_pack(a.x, a.y), bf16x2_pack(a.z, a.w), bf16x2_pack(b.x, b.y), bf16x2_pack(b.z, b.w)};
  }
}

// What a stage slot holds: no key, a stored row, or its bf16 copy (AttentionKeys::step_bf16).
enum StagedKey : uint8_t { kNoKey = 0, kStoredRow = 1, kBf16Copy = 2 };

// A round's staged rows (stage, slot_bytes apart) into the bf16 key tile from row key0: warp w
// takes rows w, w + kTcWarps, ..., a lane every 32nd 16-byte chunk; empty picks and dims past d
// are zeros. The format is a template argument: decided per chunk, it cost a fifth of the
// kernel's instructions. Returns whether this thread wrote any key.
template <RowFormat F>
__device__ __forceinline__ bool decode_round(const uint8_t* stage, const uint8_t* stage_kind, int slot_bytes, int round_keys,
                                             int key0, int d, int rope_dim, int dim_chunks, uint8_t* keys,
                                             uint8_t* tile_valid) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  bool any = false;
  for (int kk = warp; kk < round_keys; kk += kTcWarps) {
    const uint8_t kind = stage_kind[kk];  // the same for the whole warp
    const uint8_t* row = stage + kk * slot_bytes;
    if (kind == kBf16Copy) {
#pragma unroll 2
      for (int c = lane; c < dim_chunks; c += 32)
        *reinterpret_cast<uint4*>(keys + tile_chunk<kTileKeys>(key0 + kk, c)) =
            8 * c < d ? *reinterpret_cast<const uint4*>(row + 16 * c) : make_uint4(0, 0, 0, 0);
    } else {
#pragma unroll 2
      for (int c = lane; c < dim_chunks; c += 32)
        *reinterpret_cast<uint4*>(keys + tile_chunk<kTileKeys>(key0 + kk, c)) =
            kind == kStoredRow && 8 * c < d ? bf16_chunk<F>(row, c, d, rope_dim) : make_uint4(0, 0, 0, 0);
    }
    if (lane == 0) tile_valid[key0 + kk] = kind != kNoKey;
    any |= kind != kNoKey;
  }
  return any;
}

// The shared-memory addresses of a block's bf16 tiles.
struct TileAddresses {
  uint32_t q, keys, probs;
};

// S = Q·Kᵀ of the tile, times score_scale, into scores[head][key], on warpgroup MMA (sm_90a): Sᵀ
// with the keys as M and both operands in shared memory; warpgroup w takes heads 32w .. 32w + 31
// (G = 16: both take all 16, the second stores nothing). Lane (g, t) of warp i ends with, in
// s[4j + 2h + e], key 16i + g + 8h of head 8j + 2t + e of its warpgroup's.
template <int G>
__device__ __forceinline__ void scores_wgmma(const TileAddresses& at, float score_scale,
                                             float (&scores)[G][kScoreStride]) {
  constexpr int kHeads = G == 64 ? 32 : 16;
  const int wg = threadIdx.x / 128, warp = threadIdx.x / 32 % 4, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  // Both warpgroups run the products (with G = 16 the second repeats the first's and stores
  // nothing), with no thread-dependent test before them: ptxas serialized every product of a
  // kernel that had one (C7520).
  constexpr bool kHalves = 2 * kHeads == G;  // each warpgroup its own heads
  const int first_head = kHalves ? kHeads * wg : 0;
  float s[kHeads / 2] = {};
  wgmma_hold(s);  // the zeros are written before the fence, not moved past it
  wgmma_fence();
  // Every k-step of kMaxDim, the tiles holding zeros past d: over a trip count known only at run
  // time ptxas serialized the products (C7519/C7520 in its -v output).
  const uint32_t keys_low = swizzle128_low_word(at.keys), q_low = swizzle128_low_word(at.q + first_head * 128);
#pragma unroll
  for (int ks = 0; ks < kMaxDim / 16; ++ks) {
    const uint32_t in_block = (ks % 4) * 32;  // the k-step inside its 64-value column block
    wgmma_bf16_ss<kHeads>(s, swizzle128_descriptor_at(keys_low, (ks / 4) * (kTileKeys * 128) + in_block),
                          swizzle128_descriptor_at(q_low, (ks / 4) * (G * 128) + in_block));
  }
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_hold(s);
  if (!kHalves && wg != 0) return;
#pragma unroll
  for (int j = 0; j < kHeads / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int e = 0; e < 2; ++e)
        scores[kHeads * wg + 8 * j + 2 * t + e][16 * warp + g + 8 * h] = s[4 * j + 2 * h + e] * score_scale;
}

// The same on mma.sync (other GPUs): warp w < kWarps takes m-tile (16 heads) w % (G / 16) and
// kKeys keys from kKeys·(w / (G / 16)).
template <int G>
__device__ __forceinline__ void scores_mma(const TileAddresses& at, int d, float score_scale,
                                           float (&scores)[G][kScoreStride]) {
  constexpr int kMTiles = G / 16;
  constexpr int kWarps = kTcWarps < kMTiles * kTileKeys / 16 ? kTcWarps : kMTiles * kTileKeys / 16;
  constexpr int kKeys = kTileKeys * kMTiles / kWarps, kPairs = kKeys / 16;  // pairs of n-tiles: one ldmatrix each
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  if (warp >= kWarps) return;
  const int mt = warp % kMTiles, part = warp / kMTiles;
  float s[2 * kPairs][4] = {};
  const int a_row = 16 * mt + (lane & 15), a_chunk = lane >> 4;
  const int b_key = kKeys * part + (lane & 7) + 8 * (lane >> 4), b_chunk = (lane >> 3) & 1;
  // Four k-steps fill a column block: four addresses a lane, then whole blocks further on
  uint32_t a_at[4], b_at[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    a_at[j] = at.q + tile_chunk<G>(a_row, 2 * j + a_chunk);
    b_at[j] = at.keys + tile_chunk<kTileKeys>(b_key, 2 * j + b_chunk);
  }
  const int ksteps = (d + 15) / 16;
  for (int k4 = 0; k4 < ksteps; k4 += 4) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (k4 + j >= ksteps) break;
      uint32_t a[4];
      ldmatrix_x4(a, a_at[j] + (k4 / 4) * (G * 128));
#pragma unroll
      for (int pair = 0; pair < kPairs; ++pair) {
        uint32_t b[4];
        ldmatrix_x4(b, b_at[j] + (k4 / 4) * (kTileKeys * 128) + 16 * pair * 128);
        mma_bf16(s[2 * pair], a, b[0], b[1]);
        mma_bf16(s[2 * pair + 1], a, b[2], b[3]);
      }
    }
  }
#pragma unroll
  for (int j = 0; j < 2 * kPairs; ++j) {
    const int col = kKeys * part + 8 * j + 2 * t;
    *reinterpret_cast<float2*>(&scores[16 * mt + g][col]) = make_float2(s[j][0] * score_scale, s[j][1] * score_scale);
    *reinterpret_cast<float2*>(&scores[16 * mt + g + 8][col]) = make_float2(s[j][2] * score_scale, s[j][3] * score_scale);
  }
}

// A block's O (G heads × up to 512 dims) in registers, per product family: rescaled per head
// by each tile's factor, accumulated with P·K, stored with a last factor per head.
template <int G, bool Wgmma>
struct OutputTile;

// Warpgroup MMA: Oᵀ (dims as M) += Kᵀ·Pᵀ, both from shared memory: A (64 dims × 16 keys) the key
// tile read M-major (a column block's 128-byte rows are keys, each holding 64 dims), B (16 keys ×
// G heads) P. All 16 products of a tile go out as one group: no A registers to wait for.
// Warpgroup w holds dims 256w .. 256w + 255 as 4 m-tiles; lane (g, t) of warp i holds, in
// acc[m][4j + 2h + e], dim 256w + 64m + 16i + g + 8h of head 8j + 2t + e. An m-tile past d is
// computed (on zeros) but never stored.
template <int G>
struct OutputTile<G, true> {
  float acc[4][G / 2] = {};

  __device__ __forceinline__ void rescale(const float* factor) {
    const int t = threadIdx.x % 4;
#pragma unroll
    for (int j = 0; j < G / 8; ++j) {
      const float2 f = *reinterpret_cast<const float2*>(factor + 8 * j + 2 * t);
#pragma unroll
      for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) acc[m][4 * j + 2 * h] *= f.x, acc[m][4 * j + 2 * h + 1] *= f.y;
    }
  }
  __device__ __forceinline__ void accumulate(const TileAddresses& at, int /*d: all m-tiles run*/) {
    const int wg = threadIdx.x / 128;
    const uint32_t keys_low = swizzle128_low_word(at.keys), probs_low = swizzle128_low_word(at.probs);
#pragma unroll
    for (int m = 0; m < 4; ++m) wgmma_hold(acc[m]);  // the rescale's products land before the fence
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kTileKeys / 16; ++ks) {
      const uint64_t b = swizzle128_descriptor_at(probs_low, 32 * ks);
#pragma unroll
      for (int m = 0; m < 4; ++m) {  // no guard on d (zeros past it, never stored): see scores_wgmma
        const uint32_t block = (4 * wg + m) * (kTileKeys * 128);  // the m-tile's 64-dim column block
        wgmma_bf16_ss<G, true>(acc[m], swizzle128_descriptor_at(keys_low, block + ks * 16 * 128), b);
      }
    }
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int m = 0; m < 4; ++m) wgmma_hold(acc[m]);
  }
  // row(h): where head h's d values go, times factor[h] (null: 1). Each store: 8 dims of 4 heads.
  template <class Row>
  __device__ __forceinline__ void store(int d, int heads, const float* factor, Row row) const {
    const int wg = threadIdx.x / 128, warp = threadIdx.x / 32 % 4, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
#pragma unroll
    for (int j = 0; j < G / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int h = 8 * j + 2 * t + e;
        if (h >= heads) continue;
        const float f = factor ? factor[h] : 1.0f;
        float* dst = row(h);
#pragma unroll
        for (int m = 0; m < 4; ++m)
#pragma unroll
          for (int half = 0; half < 2; ++half)
            if (const int dim = 256 * wg + 64 * m + 16 * warp + g + 8 * half; dim < d)
              dst[dim] = acc[m][4 * j + 2 * half + e] * f;
      }
  }
};

// mma.sync: O += P·K, warp w takes dims 64w .. 64w + 63 of every head; lane (g, t) holds, in
// acc[m][j][2h + e], head 16m + g + 8h, dim 64w + 8j + 2t + e.
template <int G>
struct OutputTile<G, false> {
  float acc[G / 16][8][4] = {};

  __device__ __forceinline__ void rescale(const float* factor) {
    const int g = threadIdx.x % 32 / 4;
#pragma unroll
    for (int mt = 0; mt < G / 16; ++mt) {
      const float lo = factor[16 * mt + g], hi = factor[16 * mt + g + 8];
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[mt][j][0] *= lo, acc[mt][j][1] *= lo, acc[mt][j][2] *= hi, acc[mt][j][3] *= hi;
    }
  }
  __device__ __forceinline__ void accumulate(const TileAddresses& at, int d) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (64 * warp >= d) return;
#pragma unroll
    for (int ks = 0; ks < kTileKeys / 16; ++ks) {
      uint32_t b[4][4];
      const int key = 16 * ks + (lane & 7) + 8 * ((lane >> 3) & 1);
#pragma unroll
      for (int pair = 0; pair < 4; ++pair)
        ldmatrix_x4_trans(b[pair], at.keys + tile_chunk<kTileKeys>(key, 8 * warp + 2 * pair + (lane >> 4)));
#pragma unroll
      for (int mt = 0; mt < G / 16; ++mt) {
        uint32_t a[4];
        ldmatrix_x4(a, at.probs + tile_chunk<G>(16 * mt + (lane & 15), 2 * ks + (lane >> 4)));
#pragma unroll
        for (int pair = 0; pair < 4; ++pair) {
          mma_bf16(acc[mt][2 * pair], a, b[pair][0], b[pair][1]);
          mma_bf16(acc[mt][2 * pair + 1], a, b[pair][2], b[pair][3]);
        }
      }
    }
  }
  template <class Row>
  __device__ __forceinline__ void store(int d, int heads, const float* factor, Row row) const {
    const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    if (64 * warp >= d) return;
#pragma unroll
    for (int mt = 0; mt < G / 16; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int h = 16 * mt + g + 8 * half;
        if (h >= heads) continue;
        const float f = factor ? factor[h] : 1.0f;
        float* dst = row(h);
#pragma unroll
        for (int j = 0; j < 8; ++j)
          if (const int col = 64 * warp + 8 * j + 2 * t; col < d)
            *reinterpret_cast<float2*>(dst + col) = make_float2(acc[mt][j][2 * half] * f, acc[mt][j][2 * half + 1] * f);
      }
  }
};

// Block (row, group of G heads, split): the split's tiles of the row's key list. Per tile: S for
// 32 heads × 64 keys per warpgroup (16 heads, the first warpgroup alone, when G is 16), the
// softmax by 4 threads per head (each head's running max and sum stay in those threads'
// registers), then O for all heads × 256 dims per warpgroup. The heads are the products' n in
// both, so the two groupings compute every value by the same instructions: the same bits. Key rows
// travel by cp.async into the stage a round ahead of their use (a round: a tile, or half a tile
// of f32 rows); the loads that find them (the CSA pick, the block table) run two and one rounds
// ahead. Heads past the model's and dims past d are zeros in the tiles and never written.
// Split: the unnormalized O and (max, sum) of each head go to `partial` for the combine; else
// the normalized output, with the sink, goes to out.
template <bool Split, int G, bool Wgmma>
__global__ void __launch_bounds__(kTcThreads, 1)
    mma_attention_kernel(const float* q, AttentionKeys keys, const float* sinks, StepView at, int64_t begin,
                         AttentionParams p, int64_t splits, float* partial, float* out) {
  static_assert(G == 16 || G == 64, "the products' n: 16 or 32 heads a warpgroup in S, G in P·K");
  wait_for_inputs();
  extern __shared__ __align__(16) uint8_t shared_bytes[];
  TcShared<G>& sh = *reinterpret_cast<TcShared<G>*>(shared_bytes + (1024 - shared_address(shared_bytes) % 1024) % 1024);
  const int64_t groups = (p.heads + G - 1) / G;
  const int64_t local = blockIdx.x / groups, r = begin + local, h0 = (blockIdx.x % groups) * G;
  const int heads_here = int(p.heads - h0 < G ? p.heads - h0 : G);
  const int d = int(p.d), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (at.slot[r] < 0) {
    if (!Split)
      for (int i = threadIdx.x; i < heads_here * d; i += kTcThreads) out[(r * p.heads + h0) * d + i] = 0;
    return;
  }
  const KeyList list(keys, at, r, p.window, p.ratio);
  const int64_t per_split = (Split ? split_tiles(list.total()) : tiles_of(list.total())) * kTileKeys;
  const int64_t first_key = int64_t(blockIdx.y) * per_split;
  if (first_key >= list.total()) return;  // past the row's splits
  const int64_t end = first_key + per_split < list.total() ? first_key + per_split : list.total();

  // A stage slot holds a stored row or, where the keys have them, a bf16 copy of d values.
  const int row_bytes = int(keys.step_bytes), copy_bytes = 2 * d;
  const bool copies = keys.step_bf16 || keys.entry_bf16;
  const int slot_bytes = copies ? ((copy_bytes > row_bytes ? copy_bytes : row_bytes) + 15) / 16 * 16 : row_bytes;
  // Direct: every key has a bf16 copy, which cp.async puts straight into one of two key tiles
  // (the keys and the stage in turn), a tile ahead of its products: no stage, no copy between.
  // The whole-list kernel's alone (a prefill's): the split kernels serve decode steps, whose
  // rows' keys are in the cache, and compiled with the path they ran 0.4-0.6% slower.
  const bool direct = !Split && list.copies_only();
  const int round_keys = direct || slot_bytes * kTileKeys <= kStageBytes ? kTileKeys : kTileKeys / 2;
  const int rounds_per_tile = kTileKeys / round_keys;
  const int64_t rounds = tiles_of(end - first_key) * rounds_per_tile;
  const int dim_chunks = (d + 63) / 64 * 8;  // whole 64-dim slices: one per warp in P·K
  const uint32_t q_tile = shared_address(sh.q), key_tile = shared_address(sh.keys);
  const uint32_t prob_tile = shared_address(sh.probs), stage = shared_address(sh.stage);

  // Lane j < round_keys/8 of warp w finds key w + 8j of each round.
  const bool finder = lane < round_keys / 8;
  auto key_index = [&](int64_t round) { return first_key + round * round_keys + warp + 8 * lane; };
  // stored, copy: this lane's key of the round as stored and its bf16 copy (null: none), which
  // travels instead where there is one.
  auto issue = [&](const uint8_t* stored, const uint8_t* copy) {
    const uint8_t kind = copy ? kBf16Copy : stored ? kStoredRow : kNoKey;
    const uint8_t* src = copy ? copy : stored;
    for (int j = 0; j < round_keys / 8; ++j) {
      const auto row =
          reinterpret_cast<const uint8_t*>(__shfl_sync(0xFFFFFFFFu, reinterpret_cast<unsigned long long>(src), j));
      const int row_kind = __shfl_sync(0xFFFFFFFFu, int(kind), j);
      const uint32_t slot = stage + (warp + 8 * j) * slot_bytes;
      if (row_kind == kBf16Copy)
        for (int w = lane; w < copy_bytes / 16; w += 32) cp_async_16(slot + 16 * w, row + 16 * w);
      else if (row_kind == kStoredRow)
        for (int w = lane; w < row_bytes / 8; w += 32) cp_async_8(slot + 8 * w, row + 8 * w);
    }
    if (finder) sh.stage_kind[warp + 8 * lane] = kind;
    cp_async_commit();
  };
  auto copy_of = [&](int64_t round, int32_t located) {
    return copies ? list.copy(key_index(round), located, copy_bytes) : nullptr;
  };
  // Direct: a round's copies (this lane's key's, null: none, zeros) into key tile `buffer`;
  // direct_keys bit `buffer`: whether this thread found a key of it.
  uint32_t direct_keys = 0;
  auto issue_direct = [&](const uint8_t* copy, int buffer) {
    const uint32_t tile = buffer ? stage : key_tile;
    uint8_t* tile_bytes = buffer ? sh.stage : reinterpret_cast<uint8_t*>(sh.keys);
    for (int j = 0; j < kTileKeys / 8; ++j) {
      const auto row =
          reinterpret_cast<const uint8_t*>(__shfl_sync(0xFFFFFFFFu, reinterpret_cast<unsigned long long>(copy), j));
      const int kk = warp + 8 * j;
      for (int c = lane; c < d / 8; c += 32)
        if (row) cp_async_16(tile + tile_chunk<kTileKeys>(kk, c), row + 16 * c);
        else *reinterpret_cast<uint4*>(tile_bytes + tile_chunk<kTileKeys>(kk, c)) = make_uint4(0, 0, 0, 0);
    }
    if (finder) sh.tile_valid[buffer][warp + 8 * lane] = copy != nullptr;
    direct_keys = (direct_keys & ~(1u << buffer)) | (uint32_t(finder && copy) << buffer);
    cp_async_commit();
  };
  // The sources of the next round (located, block loaded) and of the one after (located).
  int32_t next_at = -1, next_block = -1, after_at = -1;
  {
    const uint8_t *stored = nullptr, *copy = nullptr;
    if (finder) {
      const int32_t at0 = list.locate(key_index(0), end);
      next_at = list.locate(key_index(1), end);
      after_at = list.locate(key_index(2), end);
      if (!direct) next_block = list.block(key_index(1), next_at);
      copy = copy_of(0, at0);
      if (!copy && !direct) stored = list.address(key_index(0), at0, list.block(key_index(0), at0));
    }
    if (direct) issue_direct(copy, 0);
    else issue(stored, copy);
  }

  // q rows of the group as bf16, while the first round travels
  for (int i0 = warp; i0 < G; i0 += 4 * kTcWarps) {
    float4 x[4][2][2];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        const int64_t head = h0 + i0 + a * kTcWarps;
        const int c = lane + 32 * b;
        const bool ok = i0 + a * kTcWarps < G && head < p.heads && 8 * c < d;
        const float4* src = reinterpret_cast<const float4*>(q + (r * p.heads + head) * d + 8 * c);
        x[a][b][0] = ok ? src[0] : make_float4(0, 0, 0, 0);
        x[a][b][1] = ok ? src[1] : make_float4(0, 0, 0, 0);
      }
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        const int c = lane + 32 * b;
        if (i0 + a * kTcWarps >= G) continue;  // dims past d too, as zeros: warpgroup MMA reads all
        const float4 u = x[a][b][0], v = x[a][b][1];
        *reinterpret_cast<uint4*>(reinterpret_cast<uint8_t*>(sh.q) + tile_chunk<G>(i0 + a * kTcWarps, c)) =
            make_uint4(bf16x2_pack(u.x, u.y), bf16x2_pack(u.z, u.w), bf16x2_pack(v.x, v.y), bf16x2_pack(v.z, v.w));
      }
  }

  if (direct) {  // key dims past d (none at d = 512) in both tiles, which the copies never write
    const int unused = kDimChunks - d / 8;
    for (int i = threadIdx.x; i < 2 * kTileKeys * unused; i += kTcThreads) {
      uint8_t* tile_bytes = i < kTileKeys * unused ? reinterpret_cast<uint8_t*>(sh.keys) : sh.stage;
      const int k = i % (kTileKeys * unused);
      *reinterpret_cast<uint4*>(tile_bytes + tile_chunk<kTileKeys>(k / unused, d / 8 + k % unused)) = make_uint4(0, 0, 0, 0);
    }
  } else if constexpr (Wgmma) {  // key dims past the decoded slices (none at d = 512), which the decode never writes
    const int unused = kDimChunks - dim_chunks;
    for (int i = threadIdx.x; i < kTileKeys * unused; i += kTcThreads)
      *reinterpret_cast<uint4*>(reinterpret_cast<uint8_t*>(sh.keys) +
                                tile_chunk<kTileKeys>(i / unused, dim_chunks + i % unused)) = make_uint4(0, 0, 0, 0);
  }
  if constexpr (Wgmma) fence_shared_for_async();  // the q tile, for warpgroup MMA (after the loop's first barrier)

  const float score_scale = p.scale * kLog2e;
  OutputTile<G, Wgmma> o;
  float run_max = -INFINITY, run_sum = 0;  // of head threadIdx.x / 4 (softmax threads)
  const int soft_head = threadIdx.x / 4, soft_part = threadIdx.x % 4;
  bool tile_has_keys = false;  // among the keys this thread decoded into the tile
  for (int64_t u = 0; u < rounds; ++u) {
    cp_async_wait_all();
    bool any_key = true, tile_done = true;
    int buffer = 0;  // the key tile the products read
    if (direct) {
      buffer = int(u % 2);
      if constexpr (Wgmma) fence_shared_for_async();  // the landed copies, for warpgroup MMA after the barrier
      // every thread's copies of this tile have landed; every warp is done with the other tile
      any_key = __syncthreads_or((direct_keys >> buffer) & 1);
      if (u + 1 < rounds) issue_direct(finder ? copy_of(u + 1, next_at) : nullptr, buffer ^ 1);
    } else {
      __syncthreads();  // every thread's copies have landed; the previous tile is done with the keys
      const int key0 = int(u % rounds_per_tile) * round_keys;
      const auto decode = [&](auto format) {
        tile_has_keys |= decode_round<decltype(format)::value>(sh.stage, sh.stage_kind, slot_bytes, round_keys, key0, d,
                                                               int(p.rope_dim), dim_chunks,
                                                               reinterpret_cast<uint8_t*>(sh.keys), sh.tile_valid[0]);
      };
      switch (p.format) {
        case RowFormat::fp8_kv: decode(std::integral_constant<RowFormat, RowFormat::fp8_kv>{}); break;
        case RowFormat::bf16: decode(std::integral_constant<RowFormat, RowFormat::bf16>{}); break;
        default: decode(std::integral_constant<RowFormat, RowFormat::f32>{}); break;
      }
      if constexpr (Wgmma) fence_shared_for_async();  // the keys just written, for warpgroup MMA after the barrier
      // the stage is free, the keys are in the tile; a tile of empty picks only (the tail of an
      // early CSA row's list) would change nothing: skip it
      tile_done = (u + 1) % rounds_per_tile == 0;
      if (tile_done) any_key = __syncthreads_or(tile_has_keys);
      else __syncthreads();
      if (u + 1 < rounds) {
        const uint8_t* copy = finder ? copy_of(u + 1, next_at) : nullptr;
        issue(finder && !copy ? list.address(key_index(u + 1), next_at, next_block) : nullptr, copy);
      }
    }
    if (finder) {
      if (!direct) next_block = list.block(key_index(u + 2), after_at);
      next_at = after_at;
      after_at = list.locate(key_index(u + 3), end);
    }
    if (!tile_done) continue;
    tile_has_keys = false;
    if (!any_key) continue;

    const TileAddresses tiles{q_tile, buffer ? stage : key_tile, prob_tile};
    if constexpr (Wgmma) {
      // each warpgroup's softmax threads read the scores of its own heads alone
      scores_wgmma<G>(tiles, score_scale, sh.scores);
      warpgroup_barrier();
    } else {
      scores_mma<G>(tiles, d, score_scale, sh.scores);
      __syncthreads();
    }

    // online softmax: 4 threads per head, 16 keys each (a warp's 8 heads are all in or all out)
    if (soft_head < G) {
      float z[16];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float4 v = *reinterpret_cast<const float4*>(&sh.scores[soft_head][16 * soft_part + 4 * i]);
        z[4 * i] = v.x, z[4 * i + 1] = v.y, z[4 * i + 2] = v.z, z[4 * i + 3] = v.w;
      }
      const uint4 valid = *reinterpret_cast<const uint4*>(&sh.tile_valid[buffer][16 * soft_part]);
      const uint32_t valid_words[4] = {valid.x, valid.y, valid.z, valid.w};
      float top = -INFINITY;
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        if (!((valid_words[i / 4] >> (8 * (i % 4))) & 0xFFu)) z[i] = -INFINITY;
        top = fmaxf(top, z[i]);
      }
      top = fmaxf(top, __shfl_xor_sync(0xFFFFFFFFu, top, 1));
      top = fmaxf(top, __shfl_xor_sync(0xFFFFFFFFu, top, 2));
      const float new_max = fmaxf(run_max, top);
      const float rescale = new_max == run_max ? 1.0f : exp2f(run_max - new_max);
      uint32_t packed[8];
      float sum = 0;  // of the bf16 probabilities that P·K uses
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float e0 = z[2 * i] == -INFINITY ? 0.0f : exp2f(z[2 * i] - new_max);
        const float e1 = z[2 * i + 1] == -INFINITY ? 0.0f : exp2f(z[2 * i + 1] - new_max);
        packed[i] = bf16x2_pack(e0, e1);
        sum += __uint_as_float(packed[i] << 16) + __uint_as_float(packed[i] & 0xFFFF0000u);
      }
      sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 1);
      sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 2);
      run_sum = run_sum * rescale + sum;
      run_max = new_max;
      uint8_t* probs = reinterpret_cast<uint8_t*>(sh.probs);
      *reinterpret_cast<uint4*>(probs + tile_chunk<G>(soft_head, 2 * soft_part)) =
          make_uint4(packed[0], packed[1], packed[2], packed[3]);
      *reinterpret_cast<uint4*>(probs + tile_chunk<G>(soft_head, 2 * soft_part + 1)) =
          make_uint4(packed[4], packed[5], packed[6], packed[7]);
      if (soft_part == 0) sh.factor[soft_head] = rescale;
    }
    if constexpr (Wgmma) fence_shared_for_async();  // P, for warpgroup MMA after the barrier
    __syncthreads();

    o.rescale(sh.factor);
    o.accumulate(tiles, d);
  }

  __syncthreads();  // every warp is done with the last tile's factors
  if (soft_part == 0 && soft_head < heads_here) {
    const int64_t head = h0 + soft_head;
    if (Split) {
      float* stats = partial + ((local * p.heads + head) * splits + blockIdx.y) * (d + 2) + d;
      stats[0] = run_max;
      stats[1] = run_sum;
    } else {
      const float sink = sinks[head] * kLog2e, top = fmaxf(run_max, sink);
      const float keep = exp2f(run_max - top);
      sh.factor[soft_head] = keep / (run_sum * keep + exp2f(sink - top));
    }
  }
  __syncthreads();
  o.store(d, heads_here, Split ? nullptr : sh.factor, [&](int h) {
    return Split ? partial + ((local * p.heads + h0 + h) * splits + blockIdx.y) * (d + 2) : out + (r * p.heads + h0 + h) * d;
  });
}

// Row (begin + blockIdx.x / heads), head (blockIdx.x % heads): the row's splits in order, with
// the sink in the denominator; with p.output_inv_freq, rotated back as it is written (thread i
// holds dims i + 128j, so a rotated pair's other value is the neighbouring lane's: the rope
// kernel's arithmetic on the same two values, without a pass of its own).
constexpr int kCombineThreads = 128, kCombineDims = kMaxDim / kCombineThreads;
__global__ void __launch_bounds__(kCombineThreads)
    combine_splits_kernel(const float* partial, AttentionKeys keys, const float* sinks, StepView at, int64_t begin,
                          AttentionParams p, int64_t splits, float* out) {
  wait_for_inputs();
  const int64_t local = blockIdx.x / p.heads, h = blockIdx.x % p.heads, r = begin + local, d = p.d;
  float* o = out + (r * p.heads + h) * d;
  if (at.slot[r] < 0) {
    for (int64_t i = threadIdx.x; i < d; i += kCombineThreads) o[i] = 0;
    return;
  }
  const int64_t used = split_count(KeyList(keys, at, r, p.window, p.ratio).total());
  const float* part = partial + (local * p.heads + h) * splits * (d + 2);  // split s: O [d], max, sum
  // Every load of a stage is issued before any is used (fully unrolled over kMaxSplits, and over
  // the kCombineDims dims a thread takes): a loop over `used` splits ran as a chain of L2 round
  // trips (the max alone three or four).
  float split_max[kMaxSplits], split_sum[kMaxSplits];
#pragma unroll
  for (int s = 0; s < kMaxSplits; ++s) {
    split_max[s] = s < used ? part[s * (d + 2) + d] : -INFINITY;
    split_sum[s] = s < used ? part[s * (d + 2) + d + 1] : 0.0f;
  }
  const float sink = sinks[h] * kLog2e;
  float top = sink;
#pragma unroll
  for (int s = 0; s < kMaxSplits; ++s) top = fmaxf(top, split_max[s]);
  float weight[kMaxSplits];
  float denom = exp2f(sink - top);
#pragma unroll
  for (int s = 0; s < kMaxSplits; ++s) {
    weight[s] = s < used ? exp2f(split_max[s] - top) : 0.0f;
    if (s < used) denom += split_sum[s] * weight[s];
  }
  // d <= kMaxDim (attention_tensor_cores_fit): one pass, every thread in it (the pairs' shuffles)
  float x[kMaxSplits][kCombineDims];
#pragma unroll
  for (int s = 0; s < kMaxSplits; ++s)
#pragma unroll
    for (int j = 0; j < kCombineDims; ++j) {
      const int64_t i = threadIdx.x + j * kCombineThreads;
      x[s][j] = s < used && i < d ? part[s * (d + 2) + i] : 0.0f;
    }
  float v[kCombineDims] = {};
#pragma unroll
  for (int s = 0; s < kMaxSplits; ++s)
#pragma unroll
    for (int j = 0; j < kCombineDims; ++j)
      if (s < used) v[j] += x[s][j] * weight[s];
  const int64_t first_rotated = d - p.rope_dim;  // even, as d is
  const float position = p.output_inv_freq ? float(at.position[r]) : 0.0f;
#pragma unroll
  for (int j = 0; j < kCombineDims; ++j) {
    const int64_t i = threadIdx.x + j * kCombineThreads;
    float value = v[j] / denom;
    if (p.output_inv_freq) {
      const float other = __shfl_xor_sync(0xFFFFFFFFu, value, 1);  // dim i ^ 1
      if (i >= first_rotated && i < d) {
        float a = i % 2 ? other : value, b = i % 2 ? value : other;
        rotate_pair(a, b, p.output_inv_freq[(i - first_rotated) / 2] * position, true);
        value = i % 2 ? b : a;
      }
    }
    if (i < d) o[i] = value;
  }
}

// Thread (row, 8-value chunk) of attention_bf16_rows.
template <RowFormat F>
__global__ void bf16_rows_kernel(const uint8_t* rows, int64_t n, int64_t row_bytes, int d, int rope_dim, uint8_t* out) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, chunks = d / 8;
  if (k >= n * chunks) return;
  const int64_t r = k / chunks;
  const int c = int(k % chunks);
  reinterpret_cast<uint4*>(out + r * 2 * d)[c] = bf16_chunk<F>(rows + r * row_bytes, c, d, rope_dim);
}

int64_t max_keys(const AttentionParams& p, const AttentionKeys& keys) {
  return p.window + (keys.has_compressed ? keys.max_entries : 0);
}

}  // namespace

bool attention_tensor_cores_fit(const AttentionParams& p, int64_t row_bytes) {
  return p.d > 0 && p.d <= kMaxDim && p.d % 8 == 0 && p.rope_dim % 8 == 0 && p.rope_dim <= p.d && row_bytes % 8 == 0 &&
         p.format != RowFormat::fp4_indexer;
}

void attention_bf16_rows(const uint8_t* rows, int64_t n, int64_t row_bytes, const AttentionParams& p, uint8_t* out,
                         cudaStream_t stream) {
  if (!attention_tensor_cores_fit(p, row_bytes))
    runtime_error("cuda attention: bf16 rows of head_dim ", p.d, ", rope_dim ", p.rope_dim, " from rows of ", row_bytes,
                  " bytes: not a tensor-core shape");
  const int64_t threads = n * (p.d / 8);
  if (threads == 0) return;
  const auto launch = [&](auto kernel) {
    launch_early(kernel, dim3(unsigned((threads + 255) / 256)), dim3(256), 0, stream, rows, n, row_bytes, int(p.d),
                 int(p.rope_dim), out);
    TETRA_CUDA_CHECK(cudaGetLastError());
  };
  switch (p.format) {
    case RowFormat::fp8_kv: launch(bf16_rows_kernel<RowFormat::fp8_kv>); break;
    case RowFormat::bf16: launch(bf16_rows_kernel<RowFormat::bf16>); break;
    default: launch(bf16_rows_kernel<RowFormat::f32>); break;
  }
}

int64_t attention_split_floats(int64_t rows, const AttentionParams& p, const AttentionKeys& keys) {
  return rows * p.heads * launch_splits(max_keys(p, keys)) * (p.d + 2);
}

bool attention_warpgroup_mma_supported() {
  int device = 0, major = 0, minor = 0;
  TETRA_CUDA_CHECK(cudaGetDevice(&device));
  TETRA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  TETRA_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major == 9 && minor == 0;  // elsewhere wgmma traps
}

void paged_attention(const float* q, const AttentionKeys& keys, const float* sinks, StepView at, int64_t begin,
                     int64_t count, AttentionParams p, AttentionKernel kernel, bool warpgroup_mma, float* scratch,
                     float* out, cudaStream_t stream) {
  if (count * p.heads == 0) return;
  if (kernel == AttentionKernel::exact) {
    if (p.d > kMaxDim) runtime_error("cuda attention: head_dim ", p.d, " is above ", kMaxDim);
    launch_early(exact_attention_kernel, dim3(unsigned(count * p.heads)), dim3(kWarps * 32), 0, stream, q, keys, sinks,
                 at, begin, p, out);
    TETRA_CUDA_CHECK(cudaGetLastError());
    return;
  }
  if (!attention_tensor_cores_fit(p, keys.step_bytes))
    runtime_error("cuda attention: head_dim ", p.d, ", rope_dim ", p.rope_dim, ", rows of ", keys.step_bytes,
                  " bytes do not fit the tensor-core kernel");
  const bool split = kernel == AttentionKernel::tensor_cores_split;
  const int64_t splits = split ? launch_splits(max_keys(p, keys)) : 1;
  // Both head groupings give every score, probability and output the same sums in the same
  // order (bit-identical), so the choice may follow the step's row count.
  const int group_heads = split && count <= kFewRows ? kDecodeHeads : kPrefillHeads;
  const auto launch = [&](auto split_c, auto heads_c, auto wgmma_c) {
    constexpr int G = decltype(heads_c)::value;
    const auto kernel_fn = mma_attention_kernel<decltype(split_c)::value, G, decltype(wgmma_c)::value>;
    const int64_t groups = (p.heads + G - 1) / G;
    launch_early(kernel_fn, dim3(unsigned(count * groups), unsigned(splits)), dim3(kTcThreads), tc_shared_bytes<G>(),
                 stream, q, keys, sinks, at, begin, p, splits, scratch, out);
    TETRA_CUDA_CHECK(cudaGetLastError());
  };
  const auto with_family = [&](auto split_c, auto heads_c) {
    if (warpgroup_mma) launch(split_c, heads_c, std::true_type{});
    else launch(split_c, heads_c, std::false_type{});
  };
  if (!split) with_family(std::false_type{}, std::integral_constant<int, kPrefillHeads>{});
  else if (group_heads == kDecodeHeads) with_family(std::true_type{}, std::integral_constant<int, kDecodeHeads>{});
  else with_family(std::true_type{}, std::integral_constant<int, kPrefillHeads>{});
  if (!split) return;
  launch_early(combine_splits_kernel, dim3(unsigned(count * p.heads)), dim3(kCombineThreads), 0, stream, scratch, keys,
               sinks, at, begin, p, splits, out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
