#include "backend/cuda/block_argmax.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/paged.cuh"

namespace tetra::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxPerLane = 16;  // index_head_dim <= 512

// One block per query row: a warp per key (decoded from its stored format once, for every
// head), then k block-wide argmax rounds (ties: lower index).
__global__ void __launch_bounds__(kThreads)
    paged_indexer_kernel(const float* q, const float* weights, PagedView keys, RowFormat format, StepView at,
                         int64_t heads, int64_t d, int64_t k, int64_t ratio, float weight_scale, float* scratch,
                         int64_t capacity, int32_t* out) {
  const int64_t r = blockIdx.x;
  const int32_t slot = at.slot[r];
  const int64_t count = slot < 0 ? 0 : (at.position[r] + 1) / ratio;
  float* z = scratch + r * capacity;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, warps = blockDim.x / 32;
  for (int64_t c = warp; c < count; c += warps) {
    const uint8_t* row = paged_row(keys, slot, c);
    float key[kMaxPerLane];
#pragma unroll
    for (int u = 0; u < kMaxPerLane; ++u) key[u] = lane + 32 * u < d ? stored_value(row, lane + 32 * u, format, d, 0) : 0.0f;
    float s = 0;
    for (int64_t h = 0; h < heads; ++h) {
      const float* qh = q + (r * heads + h) * d;
      float qk = 0;
#pragma unroll
      for (int u = 0; u < kMaxPerLane; ++u)
        if (lane + 32 * u < d) qk = fmaf(qh[lane + 32 * u], key[u], qk);
      qk = warp_reduce_sum(qk);
      s += fmaxf(qk, 0.0f) * weights[r * heads + h] * weight_scale;
    }
    if (lane == 0) z[c] = s;
  }
  __syncthreads();
  const int64_t take = min(k, count);
  for (int64_t j = 0; j < k; ++j) {
    if (j >= take) {
      if (threadIdx.x == 0) out[r * k + j] = -1;
      continue;
    }
    Candidate best{0, -1};
    for (int64_t c = threadIdx.x; c < count; c += blockDim.x)
      if (const Candidate o{z[c], z[c] == -INFINITY ? -1 : c}; better(o, best)) best = o;
    best = block_argmax(best);
    if (threadIdx.x == 0) {
      out[r * k + j] = int32_t(best.index);
      if (best.index >= 0) z[best.index] = -INFINITY;  // taken
    }
    __syncthreads();
  }
}

}  // namespace

void paged_indexer_topk(const float* q, const float* weights, PagedView keys, RowFormat format, int64_t n, StepView at,
                        int64_t heads, int64_t d, int64_t k, int64_t ratio, float weight_scale, float* scratch,
                        int64_t capacity, int32_t* out, cudaStream_t stream) {
  if (d > kMaxPerLane * 32) runtime_error("cuda indexer: head_dim ", d, " is above ", kMaxPerLane * 32);
  if (n == 0) return;
  paged_indexer_kernel<<<unsigned(n), kThreads, 0, stream>>>(q, weights, keys, format, at, heads, d, k, ratio,
                                                             weight_scale, scratch, capacity, out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
