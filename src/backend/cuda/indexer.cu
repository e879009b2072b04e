#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/bf16_codes.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/paged.cuh"

namespace tetra::cuda {
namespace {

constexpr int kSelectThreads = 512;
constexpr int kRadixBits = 8, kBins = 1 << kRadixBits;

// Both score kernels walk a row's keys in tiles of kTileKeys; a block strides over the tiles of
// one row. The grid's width only says which block computes a key, never how: scores do not
// depend on it (nor on the batch).
constexpr int kTileKeys = 64;
constexpr int64_t kScoreBlocks = 512;  // ~4 resident blocks on each of the H200's 132 SMs

__device__ __forceinline__ int64_t visible_keys(const StepView& at, int64_t r, int64_t ratio) {
  const int32_t slot = at.slot[r];
  return slot < 0 ? 0 : (at.position[r] + 1) / ratio;
}

// ---- the tensor-core scores (bf16 queries and keys, f32 accumulation)
// A block of 4 warps scores a tile of 64 keys for up to 64 heads: warp w takes heads
// [32·(w % 2), +32) (two m-tiles, their query fragments held in registers for the block's life)
// and keys [32·(w / 2), +32) of the tile (four n-tiles), as mma m16n8k16 over d. The tile's keys
// are decoded once into shared memory as bf16 rows. Per key, ReLU and the head weights are
// applied to the f32 products, summed over a warp's heads in a fixed butterfly, then the two
// head halves added in order: deterministic, and the same for every tiling of the grid.
constexpr int kMmaThreads = 128;
constexpr int kMmaMaxHeads = 64;
constexpr int kKeyPad = 8;  // bf16 per tile row beyond d: ldmatrix rows fall on distinct banks

__device__ __forceinline__ void ldmatrix_x4(uint32_t address, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// Where each stored format puts the values of an octet (8 values) in its tile row: fp4 decodes
// nibbles n and n+4 of a word into one bf16 pair (bf16_codes.cuh), so tile column 2i holds
// value i and column 2i+1 value i+4; the other formats keep their order. The query is staged in
// the same order (stage_query), so every product pairs the right elements.

// A thread's share of one key: `Octets` octets from `first` of the stored row, as bf16 pairs in
// tile order into dst (16 bytes an octet). Rows are 4-byte (fp4) or 16-byte (bf16, f32) aligned.
template <RowFormat F, int D, int Octets>
__device__ __forceinline__ void stage_key(const uint8_t* row, int first, uint16_t* dst) {
  uint4* out = reinterpret_cast<uint4*>(dst) + first;
  if constexpr (F == RowFormat::fp4_indexer) {
    uint32_t codes[Octets];
    uint8_t scale[Octets];
#pragma unroll
    for (int i = 0; i < Octets; ++i) {
      codes[i] = reinterpret_cast<const uint32_t*>(row)[first + i];
      scale[i] = row[D / 2 + (first + i) / 4];  // one e8m0 per 32 values
    }
#pragma unroll
    for (int i = 0; i < Octets; ++i) {
      // every real scale (e <= 128) folds into one exact factor with the 2^126 bias
      const bool large = scale[i] > 128;
      const uint32_t factor = large ? bf16x2_splat(kFp4Bias) : mxfp4_factor(scale[i]);
      uint32_t pair[4];
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        pair[n] = bf16x2_mul(fp4_pair(codes[i], n), factor);
        if (large) pair[n] = bf16x2_mul(pair[n], mxfp4_large_scale(scale[i]));
      }
      out[i] = {pair[0], pair[1], pair[2], pair[3]};
    }
  } else if constexpr (F == RowFormat::bf16) {
#pragma unroll
    for (int i = 0; i < Octets; ++i) out[i] = reinterpret_cast<const uint4*>(row)[first + i];
  } else {
    static_assert(F == RowFormat::f32);
#pragma unroll
    for (int i = 0; i < Octets; ++i) {
      const float4 lo = reinterpret_cast<const float4*>(row)[2 * (first + i)];
      const float4 hi = reinterpret_cast<const float4*>(row)[2 * (first + i) + 1];
      out[i] = {bf16x2_pack(lo.x, lo.y), bf16x2_pack(lo.z, lo.w), bf16x2_pack(hi.x, hi.y), bf16x2_pack(hi.z, hi.w)};
    }
  }
}

// The same share of a key's row requested into L2 ahead of its staging (every 32 bytes of it,
// its last byte, and the fp4 scale byte).
template <RowFormat F, int D, int Octets>
__device__ __forceinline__ void prefetch_key(const uint8_t* row, int first) {
  constexpr int kOctetBytes = F == RowFormat::fp4_indexer ? 4 : F == RowFormat::bf16 ? 16 : 32;
  const uint8_t* p = row + first * kOctetBytes;
#pragma unroll
  for (int o = 0; o < Octets * kOctetBytes; o += 32) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + o));
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p + Octets * kOctetBytes - 1));
  if constexpr (F == RowFormat::fp4_indexer) asm volatile("prefetch.global.L2 [%0];" ::"l"(row + D / 2 + first / 4));
}

// The query of row r (heads × D floats, 16-byte aligned) as bf16 rows of `query` in the tile's
// column order, zeros for the heads past `heads`: each thread converts whole octets (two float4 loads).
template <RowFormat F, int D, int Stride>
__device__ __forceinline__ void stage_query(const float* q, int64_t r, int64_t heads, uint16_t* query) {
  constexpr int kOctets = D / 8;
  for (int o = threadIdx.x; o < kMmaMaxHeads * kOctets; o += blockDim.x) {
    const int h = o / kOctets, octet = o % kOctets;
    uint4 pairs = make_uint4(0, 0, 0, 0);
    if (h < heads) {
      const float4* src = reinterpret_cast<const float4*>(q + (r * heads + h) * D) + 2 * octet;
      const float4 lo = src[0], hi = src[1];
      if constexpr (F == RowFormat::fp4_indexer)  // columns 2i, 2i+1 hold values i, i+4
        pairs = {bf16x2_pack(lo.x, hi.x), bf16x2_pack(lo.y, hi.y), bf16x2_pack(lo.z, hi.z), bf16x2_pack(lo.w, hi.w)};
      else
        pairs = {bf16x2_pack(lo.x, lo.y), bf16x2_pack(lo.z, lo.w), bf16x2_pack(hi.x, hi.y), bf16x2_pack(hi.z, hi.w)};
    }
    reinterpret_cast<uint4*>(query + h * Stride)[octet] = pairs;
  }
}

template <RowFormat F, int D>
__global__ void __launch_bounds__(kMmaThreads, 4)
    indexer_score_mma_kernel(const float* q, const float* weights, PagedView keys, StepView at, int64_t heads,
                             int64_t ratio, float weight_scale, float* scratch, int64_t capacity) {
  wait_for_inputs();
  constexpr int kSteps = D / 16, kStride = D + kKeyPad;
  constexpr int kOctetsPerThread = D / 8 / (kMmaThreads / kTileKeys);  // two threads per key
  __shared__ __align__(16) uint16_t tile[kTileKeys * kStride];
  __shared__ float partial[2][kTileKeys];

  // Rows in reverse: in a prefill the last rows see the most keys, and start first.
  const int64_t r = int64_t(gridDim.x) - 1 - blockIdx.x;
  const int64_t count = visible_keys(at, r, ratio);
  const int64_t tiles = (count + kTileKeys - 1) / kTileKeys;
  if (int64_t(blockIdx.y) >= tiles) return;  // the whole block
  const int32_t slot = at.slot[r];
  float* z = scratch + r * capacity;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int head_half = warp % 2, key_half = warp / 2;

  // The query of heads 32·head_half + 16·m + g (+ 8) as bf16 A fragments, held for the block's
  // life, and the head weights. The fragments come through the key tile's buffer, converted
  // once with 16-byte loads (64 scalar loads a thread, each block reading the query twice, were
  // the cost of a block that scores few tiles: a single row's, a prefill's).
  const uint32_t tile_address = uint32_t(__cvta_generic_to_shared(tile));
  stage_query<F, D, kStride>(q, r, heads, tile);
  float w[2][2];
  bool active[2];
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    active[m] = 32 * head_half + 16 * m < heads;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int64_t h = 32 * head_half + 16 * m + g + 8 * i;
      w[m][i] = h < heads ? weights[r * heads + h] * weight_scale : 0.0f;
    }
  }
  __syncthreads();
  // matrix l / 8 of an m-tile's k-step is its rows 8·(l / 8 % 2) on at k columns 8·(l / 16) on,
  // so the four registers come out as mma's a0..a3
  uint32_t a[2][kSteps][4];
  const uint32_t query_address = tile_address + 2u * uint32_t((32 * head_half + lane % 16) * kStride + 8 * (lane / 16));
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int s = 0; s < kSteps; ++s) ldmatrix_x4(query_address + 2u * uint32_t(16 * m * kStride + 16 * s), a[m][s]);
  __syncthreads();  // the first tile's keys overwrite the query

  // ldmatrix: lane l gives the address of row l % 8 of matrix l / 8 (k columns 8·(l / 8) on
  // from the k-step pair's start), for n-tile keys 32·key_half + 8·nt + l % 8.
  const uint32_t lane_address = tile_address + 2u * uint32_t((32 * key_half + lane % 8) * kStride + 8 * (lane / 8));
  // Each key of a tile is staged by two threads, half its octets each (zeros past the visible
  // keys); a thread finds its key's row in the block's next tile one tile ahead and requests it
  // into L2, so those bytes travel while this tile computes.
  const int staged_key = threadIdx.x % kTileKeys, staged_first = threadIdx.x / kTileKeys * kOctetsPerThread;
  auto row_in = [&](int64_t tile_index) -> const uint8_t* {
    const int64_t c = tile_index * kTileKeys + staged_key;
    return c < count ? paged_row(keys, slot, c) : nullptr;
  };
  const uint8_t* row = row_in(blockIdx.y);

  for (int64_t tile_index = blockIdx.y; tile_index < tiles; tile_index += gridDim.y) {
    const int64_t base = tile_index * kTileKeys;
    uint16_t* dst = tile + staged_key * kStride;
    if (row) {
      stage_key<F, D, kOctetsPerThread>(row, staged_first, dst);
    } else {
#pragma unroll
      for (int i = 0; i < kOctetsPerThread; ++i) reinterpret_cast<uint4*>(dst)[staged_first + i] = make_uint4(0, 0, 0, 0);
    }
    row = row_in(tile_index + gridDim.y);
    if (row) prefetch_key<F, D, kOctetsPerThread>(row, staged_first);
    __syncthreads();

    float acc[2][4][4] = {};
#pragma unroll
    for (int s = 0; s < kSteps; s += 2)
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        uint32_t b[4];  // k-steps s and s+1 of n-tile nt
        ldmatrix_x4(lane_address + 2u * uint32_t(8 * nt * kStride + 16 * s), b);
#pragma unroll
        for (int m = 0; m < 2; ++m)
          if (active[m]) {
            mma_bf16(acc[m][nt], a[m][s], b[0], b[1]);
            mma_bf16(acc[m][nt], a[m][s + 1], b[2], b[3]);
          }
      }

    // acc[m][nt]: heads (g, g+8) of m-tile m × keys 8·nt + 2t, 2t+1 of the warp's 32
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float s = 0;
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          s = fmaf(fmaxf(acc[m][nt][e], 0.0f), w[m][0], s);
          s = fmaf(fmaxf(acc[m][nt][2 + e], 0.0f), w[m][1], s);
        }
#pragma unroll
        for (int off = 4; off < 32; off <<= 1) s += __shfl_xor_sync(0xFFFFFFFFu, s, off);  // over g
        if (g == 0) partial[head_half][32 * key_half + 8 * nt + 2 * t + e] = s;
      }
    __syncthreads();
    if (threadIdx.x < kTileKeys && base + threadIdx.x < count)
      z[base + threadIdx.x] = partial[0][threadIdx.x] + partial[1][threadIdx.x];
    // the next tile's staging rewrites `tile` after this tile's last reads (the barrier above);
    // its epilogue rewrites `partial` after the next barrier, which these reads precede
  }
}

// ---- the exact scores (f32, the CPU reference's order over heads)
constexpr int kExactThreads = 256;
constexpr int kMaxPerLane = 16;  // index_head_dim <= 512

// A warp per key, decoded from its stored format once for every head, heads summed in order.
// PerLane: d/32 rounded up (the loops run over what d needs; the sums are the same for every
// PerLane).
template <int PerLane>
__global__ void __launch_bounds__(kExactThreads)
    indexer_score_kernel(const float* q, const float* weights, PagedView keys, RowFormat format, StepView at,
                         int64_t heads, int64_t d, int64_t ratio, float weight_scale, float* scratch, int64_t capacity) {
  wait_for_inputs();
  const int64_t r = int64_t(gridDim.x) - 1 - blockIdx.x;  // longest rows first, as above
  const int64_t count = visible_keys(at, r, ratio);
  const int32_t slot = at.slot[r];
  float* z = scratch + r * capacity;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, warps = blockDim.x / 32;
  for (int64_t base = int64_t(blockIdx.y) * kTileKeys; base < count; base += int64_t(gridDim.y) * kTileKeys) {
    const int64_t end = min(count, base + kTileKeys);
    for (int64_t c = base + warp; c < end; c += warps) {
      const uint8_t* row = paged_row(keys, slot, c);
      float key[PerLane];
#pragma unroll
      for (int u = 0; u < PerLane; ++u) key[u] = lane + 32 * u < d ? stored_value(row, lane + 32 * u, format, d, 0) : 0.0f;
      float s = 0;
      for (int64_t h = 0; h < heads; ++h) {
        const float* qh = q + (r * heads + h) * d;
        float qk = 0;
#pragma unroll
        for (int u = 0; u < PerLane; ++u)
          if (lane + 32 * u < d) qk = fmaf(qh[lane + 32 * u], key[u], qk);
        qk = warp_reduce_sum(qk);
        s += fmaxf(qk, 0.0f) * weights[r * heads + h] * weight_scale;
      }
      if (lane == 0) z[c] = s;
    }
  }
}

// Order-preserving bits: a larger float gives a larger key (-0 as +0, so they tie as floats do).
__device__ __forceinline__ uint32_t order_key(float v) {
  const uint32_t b = __float_as_uint(v + 0.0f);
  return b ^ (b >> 31 ? 0xFFFFFFFFu : 0x80000000u);
}

// Scores of -inf (nothing) are never picked.
__device__ __forceinline__ bool pickable(float v) { return v != -INFINITY; }

// The float of an order key (order_key's inverse; -0 comes back as +0).
__device__ __forceinline__ float key_score(uint32_t key) {
  return __uint_as_float(key ^ (key >> 31 ? 0x80000000u : 0xFFFFFFFFu));
}

// Where select_top reads: a row's scores from `first` on (indices first + c) ...
struct ScoreSlice {
  const float* z;
  int64_t first;
  __device__ const float* score_data() const { return z + first; }  // score c at score_data()[c]
  __device__ int32_t index(int64_t c) const { return int32_t(first + c); }
};
// ... or the first stage's candidates of a row (scores and the indices they came from).
struct Candidates {
  const float* scores;
  const int32_t* indices;
  __device__ const float* score_data() const { return scores; }
  __device__ int32_t index(int64_t c) const { return indices[c]; }
};

// A better-first compare (the larger key, then the lower index) of two (order key, index) pairs.
__device__ __forceinline__ bool better(uint32_t key, int32_t index, uint32_t other_key, int32_t other_index) {
  return key > other_key || (key == other_key && index < other_index);
}

// Sorts n (order key, index) pairs in shared memory best first with a bitonic network whose
// merges all run one way (each begins by comparing mirrored positions of its span): positions
// past n then act as worst entries that never move, so any n sorts in place. O(n log² n)
// compares over ~log² n / 2 block-wide steps. For n above the block's threads.
__device__ __forceinline__ void sort_winners(uint32_t* key, int32_t* index, int n) {
  auto order = [&](int lo, int hi) {  // lo < hi: the better of the two to lo
    const uint32_t kl = key[lo], kh = key[hi];
    const int32_t il = index[lo], ih = index[hi];
    if (better(kh, ih, kl, il)) {
      key[lo] = kh, key[hi] = kl;
      index[lo] = ih, index[hi] = il;
    }
  };
  for (int size = 2; size / 2 < n; size *= 2) {
    const int half = size / 2, pairs = (n + size - 1) / size * half;
    for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
      const int first = p / half * size, offset = p % half;
      if (first + size - 1 - offset < n) order(first + offset, first + size - 1 - offset);
    }
    __syncthreads();
    for (int stride = half / 2; stride > 0; stride /= 2) {
      for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
        const int lo = p / stride * 2 * stride + p % stride;
        if (lo + stride < n) order(lo, lo + stride);
      }
      __syncthreads();
    }
  }
}

// The same network for n ≤ blockDim.x pairs, one a thread in registers: thread p holds position
// p (worst entries past n), and each step pairs p with p ^ distance; distances below 32 go
// through warp shuffles, the others through shared memory (two buffers, so one barrier a step):
// 10 block-wide steps of 45 for 512 pairs. Every thread returns its position's pair.
struct RankedPair {
  uint32_t key;
  int32_t index;
};
__device__ __forceinline__ RankedPair sort_winners_held(const uint32_t* key, const int32_t* index, int n) {
  __shared__ uint32_t swap_key[2][kSelectThreads];
  __shared__ int32_t swap_index[2][kSelectThreads];
  const int p = threadIdx.x;
  int span = 32;  // the network's width: a power of two of whole warps
  while (span < n) span *= 2;
  uint32_t k = p < n ? key[p] : 0;  // 0 is below every pickable score's order key
  int32_t i = p < n ? index[p] : 0x7FFFFFFF;
  int buffer = 0;
  // One compare-exchange with position p ^ distance; the position whose `lower_bit` is clear
  // keeps the better pair.
  auto exchange = [&](int distance, int lower_bit) {
    uint32_t other_key = k;
    int32_t other_index = i;
    if (distance < 32) {
      other_key = __shfl_xor_sync(0xFFFFFFFFu, k, distance);
      other_index = __shfl_xor_sync(0xFFFFFFFFu, i, distance);
    } else {
      if (p < span) swap_key[buffer][p] = k, swap_index[buffer][p] = i;
      __syncthreads();
      if (p < span) other_key = swap_key[buffer][p ^ distance], other_index = swap_index[buffer][p ^ distance];
      buffer ^= 1;
    }
    if (p < span && better(other_key, other_index, k, i) == ((p & lower_bit) == 0)) k = other_key, i = other_index;
  };
  for (int size = 2; size <= span; size *= 2) {
    exchange(size - 1, size / 2);  // the mirror step
    for (int stride = size / 4; stride > 0; stride /= 2) exchange(stride, stride);
  }
  return {k, i};
}

// Scores a thread holds in registers through a select: a row of up to kSelectThreads · HeldKeys
// scores is read from memory once, not once a pass. 16 (64 registers, two blocks an SM) covers
// every single-stage row and every part; the second stage holds 32 (~110 registers), which
// covers the candidates of rows up to 32 parts (a 1M-token row).
constexpr int kHeldKeys = 16, kCandidateHeldKeys = 32;

// One block: the top k of src's `count` entries, ranked (score descending, ties to the lower
// position) into o (their indices; -1 past the pickable ones) and, when o_score is set, their
// scores (-inf past them). The k-th largest key by radix select (a shared histogram per 8 bits,
// most significant first, ending early once the bin that holds it is taken whole), then every
// key above it and the first ties at it (lower position first) collected, then the winners
// sorted. O(count + k log² k) work; the result equals k argmax rounds with ties to the lower
// position. Where scores tie, positions are in index order for both sources, so ties also go to
// the lower index. Held: the scores sit in registers (count ≤ kSelectThreads · HeldKeys), else
// each pass reads them again.
// The block is a chain of short phases (a 1024-key row's select took ~17 µs), so each is kept
// to one barrier: thread t takes the consecutive positions [t·per, (t+1)·per), so that one
// block-wide scan orders the ties; every warp finds the next bin from the histogram itself; the
// histograms rotate through three buffers, the one two passes ahead cleared meanwhile.
template <bool Held, int HeldKeys, class Source>
__device__ void select_top_in(const Source& src, int64_t count, int64_t k, int32_t* o, float* o_score) {
  using Scan = cub::BlockScan<int, kSelectThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ int hist[3][kBins];
  __shared__ int shared_above;
  extern __shared__ __align__(16) uint32_t winners[];  // order keys, then indices: k each
  uint32_t* win_key = winners;
  int32_t* win_index = reinterpret_cast<int32_t*>(winners + k);

  const int64_t per = (count + blockDim.x - 1) / blockDim.x, first = threadIdx.x * per;
  const float* run = src.score_data() + first;  // this thread's scores
  float held[Held ? HeldKeys : 1];
  if constexpr (Held) {
    // a thread's positions are consecutive: 16-byte loads where its run's length and address allow
    static_assert(HeldKeys % 4 == 0);
    const bool vector = per % 4 == 0 && reinterpret_cast<uintptr_t>(run) % 16 == 0;
#pragma unroll
    for (int i = 0; i < HeldKeys; i += 4) {
      if (vector && i < per && first + i + 3 < count) {
        const float4 v = *reinterpret_cast<const float4*>(run + i);
        held[i] = v.x, held[i + 1] = v.y, held[i + 2] = v.z, held[i + 3] = v.w;
      } else {
#pragma unroll
        for (int j = i; j < i + 4; ++j) held[j] = j < per && first + j < count ? run[j] : -INFINITY;
      }
    }
  }
  // f(c, score) for each of this thread's positions in order (-inf past count); every thread
  // takes the same number of steps (the warp match in the histogram needs whole warps).
  auto each_key = [&](auto&& f) {
    if constexpr (Held) {
#pragma unroll
      for (int i = 0; i < HeldKeys; ++i) {
        if (i >= per) break;
        f(first + i, held[i]);
      }
    } else {
      for (int64_t i = 0; i < per; ++i) f(first + i, first + i < count ? run[i] : -INFINITY);
    }
  };

  for (int b = threadIdx.x; b < 2 * kBins; b += blockDim.x) hist[b / kBins][b % kBins] = 0;
  if (threadIdx.x == 0) shared_above = 0;
  __syncthreads();
  // need: how many of the keys matching `prefix` on the bits of `mask` are still to be taken
  uint32_t prefix = 0, mask = 0;
  int need = 0, take = 0;
  const int lane = threadIdx.x & 31;
  for (int pass = 0, shift = 32 - kRadixBits; shift >= 0; ++pass, shift -= kRadixBits) {
    int* h = hist[pass % 3];
    each_key([&](int64_t, float v) {  // equal bins of a warp add once
      const uint32_t key = order_key(v);
      const int bin = pickable(v) && (key & mask) == prefix ? int((key >> shift) & (kBins - 1)) : -1;
      const unsigned peers = __match_any_sync(0xFFFFFFFFu, bin);
      if (bin >= 0 && lane == __ffs(peers) - 1) atomicAdd(&h[bin], __popc(peers));
    });
    __syncthreads();
    // the buffer two passes ahead was last read in the previous pass, before this barrier
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) hist[(pass + 2) % 3][b] = 0;
    // lane l sums its bins from the top; the lane whose range holds the need-th largest finds
    // its bin
    constexpr int kLaneBins = kBins / 32;
    const int top = kBins - 1 - lane * kLaneBins;
    int mine = 0;
#pragma unroll
    for (int i = 0; i < kLaneBins; ++i) mine += h[top - i];
    int inclusive = mine;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const int o2 = __shfl_up_sync(0xFFFFFFFFu, inclusive, off);
      if (lane >= off) inclusive += o2;
    }
    if (pass == 0) {  // the first pass sees every pickable key
      const int valid = __shfl_sync(0xFFFFFFFFu, inclusive, 31);
      take = need = k < valid ? int(k) : valid;
    }
    if (take == 0) break;
    const int before = inclusive - mine;
    int bin = top, above = before;
    const bool holds = before < need && need <= inclusive;
    if (holds)
      for (int i = 0; i < kLaneBins - 1 && above + h[bin] < need; ++i) above += h[bin--];
    const int finder = __ffs(__ballot_sync(0xFFFFFFFFu, holds)) - 1;
    bin = __shfl_sync(0xFFFFFFFFu, bin, finder);
    above = __shfl_sync(0xFFFFFFFFu, above, finder);
    prefix |= uint32_t(bin) << shift;
    mask |= uint32_t(kBins - 1) << shift;
    need -= above;
    if (h[bin] == need) break;  // every key of the bin wins: its lower bits do not matter
  }

  if (take > 0) {
    // prefix: the k-th largest key on the bits of mask; every key above it wins, and the first
    // `need` keys equal to it, which fill win[take - need, take)
    int equals = 0;
    each_key([&](int64_t c, float v) {
      const uint32_t key = order_key(v);
      if (!pickable(v)) return;
      if ((key & mask) > prefix) {
        const int slot = atomicAdd(&shared_above, 1);
        win_key[slot] = key;
        win_index[slot] = src.index(c);
      }
      equals += (key & mask) == prefix;
    });
    int rank;
    Scan(scan).ExclusiveSum(equals, rank);
    if (equals > 0 && rank < need) {
      each_key([&](int64_t c, float v) {
        const uint32_t key = order_key(v);
        if (pickable(v) && (key & mask) == prefix && rank < need) {
          win_key[take - need + rank] = key;
          win_index[take - need + rank] = src.index(c);
          ++rank;
        }
      });
    }
    __syncthreads();
    if (take <= int(blockDim.x)) {
      const RankedPair mine = sort_winners_held(win_key, win_index, take);
      if (int(threadIdx.x) < take) {
        o[threadIdx.x] = mine.index;
        if (o_score) o_score[threadIdx.x] = key_score(mine.key);
      }
    } else {
      sort_winners(win_key, win_index, take);
      for (int i = threadIdx.x; i < take; i += blockDim.x) {
        o[i] = win_index[i];
        if (o_score) o_score[i] = key_score(win_key[i]);
      }
    }
  }
  for (int64_t j = take + threadIdx.x; j < k; j += blockDim.x) {
    o[j] = -1;
    if (o_score) o_score[j] = -INFINITY;
  }
}

template <int HeldKeys = kHeldKeys, class Source>
__device__ void select_top(const Source& src, int64_t count, int64_t k, int32_t* o, float* o_score) {
  if (count <= int64_t(HeldKeys) * blockDim.x) select_top_in<true, HeldKeys>(src, count, k, o, o_score);
  else select_top_in<false, HeldKeys>(src, count, k, o, o_score);
}

// Rows of many keys (long contexts) select in two stages: block (row, part) ranks the top k of
// its part of the row (a stretch of `part_keys` keys) into candidates, then one block per row
// ranks the top k of the row's candidates. The same picks in the same order as one stage: a
// key among the row's top k is beaten by fewer than k keys, so by fewer than k in its part; and
// the candidates lie in part order, each part ranked with ties to the lower index, so equal
// scores meet the second stage in index order. (One block over a 1M-token row walked 262144
// keys five times.)
constexpr int64_t kPartKeys = 8192;
constexpr int64_t kMaxParts = 64;

__global__ void __launch_bounds__(kSelectThreads)
    indexer_select_kernel(const float* scratch, int64_t capacity, StepView at, int64_t ratio, int64_t k, int32_t* out) {
  wait_for_inputs();
  const int64_t r = blockIdx.x;
  select_top(ScoreSlice{scratch + r * capacity, 0}, visible_keys(at, r, ratio), k, out + r * k, nullptr);
}

__global__ void __launch_bounds__(kSelectThreads)
    indexer_select_parts_kernel(const float* scratch, int64_t capacity, StepView at, int64_t ratio, int64_t k,
                                int64_t part_keys, float* part_scores, int32_t* part_indices) {
  wait_for_inputs();
  const int64_t r = blockIdx.x, part = blockIdx.y, first = part * part_keys;
  const int64_t count = visible_keys(at, r, ratio);
  const int64_t keys = count > first ? (count - first < part_keys ? count - first : part_keys) : 0;
  const int64_t slot = (r * gridDim.y + part) * k;
  select_top(ScoreSlice{scratch + r * capacity, first}, keys, k, part_indices + slot, part_scores + slot);
}

__global__ void __launch_bounds__(kSelectThreads)
    indexer_select_candidates_kernel(const float* part_scores, const int32_t* part_indices, int64_t parts, int64_t k,
                                     int32_t* out) {
  wait_for_inputs();
  const int64_t r = blockIdx.x, first = r * parts * k;
  select_top<kCandidateHeldKeys>(Candidates{part_scores + first, part_indices + first}, parts * k, k, out + r * k,
                                 nullptr);
}

int64_t select_parts(int64_t capacity) {
  const int64_t parts = (capacity + kPartKeys - 1) / kPartKeys;
  return parts < kMaxParts ? parts : kMaxParts;
}

// The top-k's scratch: every row's scores over its capacity, then (rows of several parts) each
// part's k candidate scores and their key indices.
struct TopkScratch {
  TopkScratch(float* base, int64_t n, int64_t capacity, int64_t k)
      : parts(select_parts(capacity)),
        scores(base),
        part_scores(base ? base + n * capacity : nullptr),
        part_indices(base ? reinterpret_cast<int32_t*>(part_scores + n * parts * k) : nullptr),
        floats(n * capacity + (parts > 1 ? 2 * n * parts * k : 0)) {}
  int64_t parts;
  float* scores;
  float* part_scores;
  int32_t* part_indices;
  int64_t floats;
};

// The tensor cores take heads <= 64 and d of 32, 64 or 128 over a 16-byte aligned query and rows
// whose loads are aligned (fp4: 4 bytes, the 68-byte V4 rows; bf16 and f32: 16 bytes); any other
// shape (tiny fp4 rows of 17 or 34 bytes, more heads, other d) keeps the f32 kernel in both
// numerics.
bool tensor_core_scores(const float* q, const PagedView& keys, RowFormat format, int64_t heads, int64_t d) {
  if (format == RowFormat::fp8_kv || heads > kMmaMaxHeads || (d != 32 && d != 64 && d != 128)) return false;
  if (reinterpret_cast<uintptr_t>(q) % 16 != 0) return false;
  const int64_t align = format == RowFormat::fp4_indexer ? 4 : 16;
  return keys.row_bytes % align == 0 && keys.block_bytes % align == 0 &&
         reinterpret_cast<uintptr_t>(keys.pool) % uintptr_t(align) == 0;
}

template <RowFormat F, class Launch>
void launch_mma_scores(int64_t d, Launch&& launch) {
  if (d == 32) launch(indexer_score_mma_kernel<F, 32>);
  else if (d == 64) launch(indexer_score_mma_kernel<F, 64>);
  else launch(indexer_score_mma_kernel<F, 128>);
}

}  // namespace

void paged_indexer_scores(const float* q, const float* weights, PagedView keys, RowFormat format, int64_t n, StepView at,
                          int64_t heads, int64_t d, int64_t ratio, float weight_scale, bool bf16_inputs, float* scratch,
                          int64_t capacity, cudaStream_t stream) {
  if (d > kMaxPerLane * 32) runtime_error("cuda indexer: head_dim ", d, " is above ", kMaxPerLane * 32);
  if (n > 0x7FFFFFFF) runtime_error("cuda indexer: ", n, " rows in one step");
  const int64_t tiles = (capacity + kTileKeys - 1) / kTileKeys;
  if (n == 0 || tiles == 0) return;
  // blocks per row: one row fills the GPU, a large step takes one block per row
  const int64_t columns = std::min(tiles, std::max<int64_t>(1, (kScoreBlocks + n - 1) / n));
  const dim3 grid{unsigned(n), unsigned(columns)};
  if (bf16_inputs && tensor_core_scores(q, keys, format, heads, d)) {
    auto run = [&](auto kernel) {
      launch_early(kernel, dim3(grid), dim3(kMmaThreads), 0, stream, q, weights, keys, at, heads, ratio, weight_scale,
                   scratch, capacity);
    };
    if (format == RowFormat::fp4_indexer) launch_mma_scores<RowFormat::fp4_indexer>(d, run);
    else if (format == RowFormat::bf16) launch_mma_scores<RowFormat::bf16>(d, run);
    else launch_mma_scores<RowFormat::f32>(d, run);
  } else {
    auto run = [&](auto kernel) {
      launch_early(kernel, dim3(grid), dim3(kExactThreads), 0, stream, q, weights, keys, format, at, heads, d, ratio,
                   weight_scale, scratch, capacity);
    };
    if (d <= 32) run(indexer_score_kernel<1>);
    else if (d <= 64) run(indexer_score_kernel<2>);
    else if (d <= 128) run(indexer_score_kernel<4>);
    else if (d <= 256) run(indexer_score_kernel<8>);
    else run(indexer_score_kernel<kMaxPerLane>);
  }
  TETRA_CUDA_CHECK(cudaGetLastError());
}

int64_t indexer_topk_scratch_floats(int64_t n, int64_t capacity, int64_t k) {
  return TopkScratch(nullptr, n, capacity, k).floats;
}

void paged_indexer_topk(const float* q, const float* weights, PagedView keys, RowFormat format, int64_t n, StepView at,
                        int64_t heads, int64_t d, int64_t k, int64_t ratio, float weight_scale, bool bf16_inputs,
                        float* scratch, int64_t capacity, int32_t* out, cudaStream_t stream) {
  const size_t winners = size_t(k) * 2 * sizeof(uint32_t);
  if (winners > 48 * 1024) runtime_error("cuda indexer: top-", k, " is above ", 48 * 1024 / 8);
  if (n == 0 || k == 0) return;
  const TopkScratch t(scratch, n, capacity, k);
  paged_indexer_scores(q, weights, keys, format, n, at, heads, d, ratio, weight_scale, bf16_inputs, t.scores, capacity,
                       stream);
  if (t.parts <= 1) {
    launch_early(indexer_select_kernel, dim3(unsigned(n)), dim3(kSelectThreads), winners, stream, t.scores, capacity,
                 at, ratio, k, out);
  } else {
    const int64_t part_keys = (capacity + t.parts - 1) / t.parts;
    launch_early(indexer_select_parts_kernel, dim3(unsigned(n), unsigned(t.parts)), dim3(kSelectThreads), winners,
                 stream, t.scores, capacity, at, ratio, k, part_keys, t.part_scores, t.part_indices);
    TETRA_CUDA_CHECK(cudaGetLastError());
    launch_early(indexer_select_candidates_kernel, dim3(unsigned(n)), dim3(kSelectThreads), winners, stream,
                 t.part_scores, t.part_indices, t.parts, k, out);
  }
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
