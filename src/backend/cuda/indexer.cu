#include "backend/cuda/indexer.h"

#include "backend/cuda/block_argmax.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/row_dot.cuh"

namespace tetra::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void indexer_topk_kernel(const float* q, const float* weights, const float* keys, const int32_t* key_begin,
                                    const int32_t* visible, int64_t heads, int64_t d, int64_t k, float weight_scale,
                                    float* scratch, int64_t scratch_stride, int32_t* out) {
  const int64_t r = blockIdx.x, begin = key_begin[r], count = visible[r];
  float* z = scratch + r * scratch_stride;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, warps = blockDim.x / 32;
  for (int64_t c = warp; c < count; c += warps) {
    const float* key = keys + (begin + c) * d;
    float s = 0;
    for (int64_t h = 0; h < heads; ++h) {
      const float* qh = q + (r * heads + h) * d;
      float qk = 0;
      for (int64_t i = lane; i < d; i += 32) qk = fmaf(qh[i], key[i], qk);
      qk = warp_sum(qk);
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

void indexer_topk(const float* q, const float* weights, const float* keys, const int32_t* key_begin,
                  const int32_t* visible, int64_t n, int64_t heads, int64_t d, int64_t k, float weight_scale,
                  float* scratch, int64_t scratch_stride, int32_t* out, cudaStream_t stream) {
  if (n == 0) return;
  indexer_topk_kernel<<<unsigned(n), kThreads, 0, stream>>>(q, weights, keys, key_begin, visible, heads, d, k, weight_scale,
                                                            scratch, scratch_stride, out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
