#include "backend/cuda/attention.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/row_dot.cuh"

namespace tetra::cuda {
namespace {

constexpr int kThreads = 128;

// One block per (row, head): scores by warps, the softmax with the sink, then the weighted sum
// with every thread owning output dims (coalesced reads of each key row).
__global__ void sparse_attention_kernel(const float* q, const float* kv, const int32_t* idx, const float* sinks,
                                        int64_t heads, int64_t d, int64_t K, float scale, float* scratch, float* out) {
  __shared__ float denom;
  const int64_t r = blockIdx.x / heads, h = blockIdx.x % heads;
  const float* qh = q + (r * heads + h) * d;
  const int32_t* rows = idx + r * K;
  float* z = scratch + int64_t(blockIdx.x) * K;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, warps = blockDim.x / 32;
  for (int64_t j = warp; j < K; j += warps) {
    if (rows[j] < 0) continue;
    const float* key = kv + int64_t(rows[j]) * d;
    float s = 0;
    for (int64_t i = lane; i < d; i += 32) s = fmaf(qh[i], key[i], s);
    s = warp_sum(s);
    if (lane == 0) z[j] = s * scale;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const float sink = sinks[h];
    float m = sink;
    for (int64_t j = 0; j < K; ++j)
      if (rows[j] >= 0) m = fmaxf(m, z[j]);
    float sum = expf(sink - m);
    for (int64_t j = 0; j < K; ++j)
      if (rows[j] >= 0) sum += (z[j] = expf(z[j] - m));
    denom = sum;
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float acc = 0;
    for (int64_t j = 0; j < K; ++j)
      if (rows[j] >= 0) acc = fmaf(z[j] / denom, kv[int64_t(rows[j]) * d + i], acc);
    out[(r * heads + h) * d + i] = acc;
  }
}

}  // namespace

void sparse_attention(const float* q, const float* kv, const int32_t* idx, const float* sinks, int64_t n, int64_t heads,
                      int64_t d, int64_t K, float scale, float* scratch, float* out, cudaStream_t stream) {
  if (n * heads == 0) return;
  sparse_attention_kernel<<<unsigned(n * heads), kThreads, 0, stream>>>(q, kv, idx, sinks, heads, d, K, scale, scratch, out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
