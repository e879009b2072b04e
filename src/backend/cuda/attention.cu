#include "backend/cuda/cuda_check.h"
#include "backend/cuda/paged.cuh"

namespace tetra::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxPerLane = 16;  // head_dim <= 512

// One block per (row, head). The key list is built here from the row's position: the window
// (this step's rows from its sequence's start, the ring before), then the compressed entries.
// Each warp runs an online softmax over every kWarps-th key, reading the key in its stored
// format once for the score and the weighted sum; the warps' partial results merge at the end
// with the sink in the denominator.
__global__ void __launch_bounds__(kWarps * 32)
    paged_attention_kernel(const float* q, const uint8_t* step_kv, int64_t step_bytes, PagedView window,
                           PagedView compressed, bool has_compressed, const int32_t* selected, int64_t k,
                           const float* sinks, StepView at, AttentionParams p, float* out) {
  __shared__ float part_m[kWarps], part_s[kWarps];
  __shared__ float part_acc[kWarps][kMaxPerLane * 32];
  const int64_t r = blockIdx.x / p.heads, h = blockIdx.x % p.heads, d = p.d;
  float* o = out + (r * p.heads + h) * d;
  const int32_t slot = at.slot[r];
  if (slot < 0) {
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) o[i] = 0;
    return;
  }
  const int64_t t = at.position[r], start = at.start[r], first = at.first_row[r];
  const int64_t lo = t - p.window + 1 > 0 ? t - p.window + 1 : 0, nw = t - lo + 1;
  const int64_t nc = !has_compressed ? 0 : selected ? k : (t + 1) / p.ratio;
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
  for (int64_t j = warp; j < nw + nc; j += kWarps) {
    const uint8_t* row;
    RowFormat f = p.format;
    if (j < nw) {
      const int64_t pos = lo + j;
      row = pos >= start ? step_kv + (first + pos - start) * step_bytes : paged_row(window, slot, pos % p.window);
    } else {
      const int64_t e = selected ? selected[r * k + (j - nw)] : j - nw;
      if (e < 0) continue;  // the same for the whole warp
      row = paged_row(compressed, slot, e);
    }
    float kv[kMaxPerLane];
    float dot = 0;
#pragma unroll
    for (int u = 0; u < kMaxPerLane; ++u) {
      const int64_t i = lane + 32 * u;
      kv[u] = i < d ? stored_value(row, i, f, d, p.rope_dim) : 0.0f;
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

}  // namespace

void paged_attention(const float* q, const uint8_t* step_kv, int64_t step_bytes, PagedView window, PagedView compressed,
                     bool has_compressed, const int32_t* selected, int64_t k, const float* sinks, int64_t n, StepView at,
                     AttentionParams p, float* out, cudaStream_t stream) {
  if (p.d > kMaxPerLane * 32) runtime_error("cuda attention: head_dim ", p.d, " is above ", kMaxPerLane * 32);
  if (n * p.heads == 0) return;
  paged_attention_kernel<<<unsigned(n * p.heads), kWarps * 32, 0, stream>>>(q, step_kv, step_bytes, window, compressed,
                                                                             has_compressed, selected, k, sinks, at, p, out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
