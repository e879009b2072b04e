#include <cub/block/block_scan.cuh>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/paged.cuh"

namespace tetra::cuda {
namespace {

constexpr int kScoreThreads = 256;
constexpr int kKeysPerBlock = 256;  // a grid column per 256 keys: long rows spread over the GPU
constexpr int kMaxPerLane = 16;     // index_head_dim <= 512
constexpr int kSelectThreads = 512;
constexpr int kRadixBits = 8, kBins = 1 << kRadixBits;

__device__ __forceinline__ int64_t visible_keys(const StepView& at, int64_t r, int64_t ratio) {
  const int32_t slot = at.slot[r];
  return slot < 0 ? 0 : (at.position[r] + 1) / ratio;
}

// Scores of keys [blockIdx.y·kKeysPerBlock, +kKeysPerBlock) of row blockIdx.x: a warp per key,
// decoded from its stored format once for every head. PerLane: d/32 rounded up (the loops run
// over what d needs; the sums are the same for every PerLane).
template <int PerLane>
__global__ void __launch_bounds__(kScoreThreads)
    indexer_score_kernel(const float* q, const float* weights, PagedView keys, RowFormat format, StepView at,
                         int64_t heads, int64_t d, int64_t ratio, float weight_scale, float* scratch, int64_t capacity) {
  const int64_t r = blockIdx.x;
  const int64_t count = visible_keys(at, r, ratio);
  const int64_t begin = int64_t(blockIdx.y) * kKeysPerBlock, end = min(count, begin + kKeysPerBlock);
  if (begin >= end) return;
  const int32_t slot = at.slot[r];
  float* z = scratch + r * capacity;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, warps = blockDim.x / 32;
  for (int64_t c = begin + warp; c < end; c += warps) {
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

// Order-preserving bits: a larger float gives a larger key (-0 as +0, so they tie as floats do).
__device__ __forceinline__ uint32_t order_key(float v) {
  const uint32_t b = __float_as_uint(v + 0.0f);
  return b ^ (b >> 31 ? 0xFFFFFFFFu : 0x80000000u);
}

// Each winners array is padded to whole 16-byte groups: ptxas merges the ranking loop's unrolled
// tail into one wide shared load, which must stay inside the allocation (compute-sanitizer).
__host__ __device__ constexpr int64_t winner_stride(int64_t k) { return (k + 3) / 4 * 4; }

// Scores of -inf (nothing) are never picked.
__device__ __forceinline__ bool pickable(float v) { return v != -INFINITY; }

// One block per row: the k-th largest key by radix select (a shared histogram per 8 bits, most
// significant first), then one ordered pass collecting every score above it and the first ties
// at it (lower index first), then the winners placed by rank (score descending, index
// ascending). O(keys) work per row; the result equals k argmax rounds with ties to the lower index.
__global__ void __launch_bounds__(kSelectThreads)
    indexer_select_kernel(const float* scratch, int64_t capacity, StepView at, int64_t ratio, int64_t k, int32_t* out) {
  using Scan = cub::BlockScan<int, kSelectThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ int hist[kBins];
  __shared__ uint32_t shared_prefix;
  __shared__ int shared_need, shared_take, shared_above;
  extern __shared__ __align__(16) uint32_t winners[];  // order keys, then indices: winner_stride(k) each
  uint32_t* win_key = winners;
  int32_t* win_index = reinterpret_cast<int32_t*>(winners + winner_stride(k));

  const int64_t r = blockIdx.x;
  const int64_t count = visible_keys(at, r, ratio);
  const float* z = scratch + r * capacity;
  int32_t* o = out + r * k;

  // need: how many of the keys matching `prefix` on the bits seen so far are still to be taken
  uint32_t prefix = 0, mask = 0;
  int need = 0, take = 0;
  for (int shift = 32 - kRadixBits; shift >= 0; shift -= kRadixBits) {
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    for (int64_t base = 0; base < count; base += blockDim.x) {  // whole warps: equal bins add once per warp
      const int64_t c = base + threadIdx.x;
      const float v = c < count ? z[c] : -INFINITY;
      const uint32_t key = order_key(v);
      const int bin = pickable(v) && (key & mask) == prefix ? int((key >> shift) & (kBins - 1)) : -1;
      const unsigned peers = __match_any_sync(0xFFFFFFFFu, bin);
      if (bin >= 0 && (threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&hist[bin], __popc(peers));
    }
    __syncthreads();
    if (threadIdx.x < 32) {  // warp 0 finds the bin holding the need-th largest: lane l owns bins from the top
      const int lane = threadIdx.x, per = kBins / 32, top = kBins - 1 - lane * per;
      int mine = 0;
      for (int i = 0; i < per; ++i) mine += hist[top - i];
      int inclusive = mine;
#pragma unroll
      for (int off = 1; off < 32; off <<= 1) {
        const int o2 = __shfl_up_sync(0xFFFFFFFFu, inclusive, off);
        if (lane >= off) inclusive += o2;
      }
      if (shift == 32 - kRadixBits) {  // the first pass sees every pickable key
        const int valid = __shfl_sync(0xFFFFFFFFu, inclusive, 31);
        take = k < valid ? int(k) : valid;
        need = take;
      }
      const int before = inclusive - mine;
      if (need > 0 && before < need && need <= inclusive) {
        int acc = before, bin = top;
        for (int i = 0; i < per; ++i, --bin) {
          if (acc + hist[bin] >= need) break;
          acc += hist[bin];
        }
        shared_prefix = prefix | (uint32_t(bin) << shift);
        shared_need = need - acc;
      }
      if (lane == 0) shared_take = take;
    }
    __syncthreads();
    take = shared_take;
    if (take == 0) break;
    prefix = shared_prefix;
    need = shared_need;
    mask |= uint32_t(kBins - 1) << shift;
    __syncthreads();  // shared_prefix and shared_need are rewritten next pass
  }

  if (take > 0) {
    // prefix: the k-th largest key; every key above it wins, and the first `need` keys equal to it
    if (threadIdx.x == 0) shared_above = 0;
    __syncthreads();
    const int ties_at = take - need;  // ties fill win[ties_at, take)
    int ties = 0;
    for (int64_t base = 0; base < count; base += blockDim.x) {
      const int64_t c = base + threadIdx.x;
      const float v = c < count ? z[c] : -INFINITY;
      const uint32_t key = order_key(v);
      const bool ok = pickable(v), above = ok && key > prefix, equal = ok && key == prefix;
      if (above) {
        const int slot = atomicAdd(&shared_above, 1);
        win_key[slot] = key;
        win_index[slot] = int32_t(c);
      }
      const int equals = __syncthreads_count(equal && ties < need);
      if (equals > 0) {  // uniform: the ties of this stretch in index order
        int rank;
        Scan(scan).ExclusiveSum(equal ? 1 : 0, rank);
        if (equal && ties + rank < need) {
          win_key[ties_at + ties + rank] = key;
          win_index[ties_at + ties + rank] = int32_t(c);
        }
        ties += equals;
        __syncthreads();  // scan storage is reused
      }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < take; i += blockDim.x) {
      const uint32_t key = win_key[i];
      const int32_t index = win_index[i];
      int rank = 0;
      for (int j = 0; j < take; ++j) rank += win_key[j] > key || (win_key[j] == key && win_index[j] < index);
      o[rank] = index;
    }
  }
  for (int64_t j = take + threadIdx.x; j < k; j += blockDim.x) o[j] = -1;
}

}  // namespace

void paged_indexer_topk(const float* q, const float* weights, PagedView keys, RowFormat format, int64_t n, StepView at,
                        int64_t heads, int64_t d, int64_t k, int64_t ratio, float weight_scale, float* scratch,
                        int64_t capacity, int32_t* out, cudaStream_t stream) {
  if (d > kMaxPerLane * 32) runtime_error("cuda indexer: head_dim ", d, " is above ", kMaxPerLane * 32);
  const int64_t columns = (capacity + kKeysPerBlock - 1) / kKeysPerBlock;
  if (columns > 65535) runtime_error("cuda indexer: ", capacity, " keys per sequence are above ", 65535 * kKeysPerBlock);
  const size_t winners = size_t(winner_stride(k)) * 2 * sizeof(uint32_t);
  if (winners > 48 * 1024) runtime_error("cuda indexer: top-", k, " is above ", 48 * 1024 / 8);
  if (n == 0 || k == 0) return;
  if (columns > 0) {
    const dim3 grid{unsigned(n), unsigned(columns)};
    auto score = [&](auto kernel) {
      kernel<<<grid, kScoreThreads, 0, stream>>>(q, weights, keys, format, at, heads, d, ratio, weight_scale, scratch,
                                                 capacity);
    };
    if (d <= 32) score(indexer_score_kernel<1>);
    else if (d <= 64) score(indexer_score_kernel<2>);
    else if (d <= 128) score(indexer_score_kernel<4>);
    else if (d <= 256) score(indexer_score_kernel<8>);
    else score(indexer_score_kernel<kMaxPerLane>);
    TETRA_CUDA_CHECK(cudaGetLastError());
  }
  indexer_select_kernel<<<unsigned(n), kSelectThreads, winners, stream>>>(scratch, capacity, at, ratio, k, out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
