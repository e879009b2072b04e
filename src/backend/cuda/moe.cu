#include "backend/cuda/moe.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/row_dot.cuh"

namespace tetra::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

__device__ float score_of(float v, ScoringFunc f) {
  switch (f) {
    case ScoringFunc::sigmoid: return 1.0f / (1.0f + expf(-v));
    case ScoringFunc::sqrtsoftplus: return sqrtf(v > 20 ? v : log1pf(expf(v)));
    case ScoringFunc::softmax: break;
  }
  return v;  // softmax: normalized by the caller
}

// One block per token; dynamic shared memory: 2·experts floats (scores, biased scores).
__global__ void route_kernel(const float* logits, const float* bias, const int32_t* tid2eid, const int32_t* ids,
                             RouteParams p, float* weights, int32_t* selected) {
  extern __shared__ float shared[];
  float* s = shared;
  float* biased = shared + p.experts;
  const int64_t r = blockIdx.x, E = p.experts, k = p.k;
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) s[e] = score_of(logits[r * E + e], p.scoring);
  __syncthreads();
  if (threadIdx.x != 0) return;
  if (p.scoring == ScoringFunc::softmax) {
    float m = -INFINITY, sum = 0;
    for (int64_t e = 0; e < E; ++e) m = fmaxf(m, s[e]);
    for (int64_t e = 0; e < E; ++e) sum += (s[e] = expf(s[e] - m));
    for (int64_t e = 0; e < E; ++e) s[e] /= sum;
  }
  int32_t* sel = selected + r * k;
  if (tid2eid) {
    for (int64_t j = 0; j < k; ++j) {
      sel[j] = tid2eid[int64_t(ids[r]) * k + j];
      if (sel[j] < 0 || sel[j] >= E) __trap();
    }
  } else {
    for (int64_t e = 0; e < E; ++e) biased[e] = s[e] + (bias ? bias[e] : 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      for (int64_t e = 0; e < E; ++e)
        if (biased[e] != -INFINITY && (best < 0 || biased[e] > biased[best])) best = e;
      if (best < 0) __trap();  // fewer finite scores than k: the router produced NaNs
      sel[j] = int32_t(best);
      biased[best] = -INFINITY;
    }
  }
  float sum = 0;
  for (int64_t j = 0; j < k; ++j) sum += s[sel[j]];
  for (int64_t j = 0; j < k; ++j) weights[r * k + j] = (p.renormalize ? s[sel[j]] / (sum + 1e-20f) : s[sel[j]]) * p.route_scale;
}

// grid (n·k, inter / warps): h[pair, o] = swiglu(w1_e[o]·x_t, w3_e[o]·x_t)
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    expert_up_kernel(const float* x, int64_t dim, int64_t inter, const int32_t* selected, int64_t k, const WeightRef* w1,
                     const WeightRef* w3, float limit, bool round_input, float* h) {
  __shared__ __align__(16) float tile[kTilePitch];
  const int64_t o = int64_t(blockIdx.y) * kWarpsPerBlock + threadIdx.x / 32;
  const int64_t pair = blockIdx.x, t = pair / k;
  const int32_t e = selected[pair];
  float gate[1] = {}, up[1] = {};
  block_row_dot<1>(w1[e], o, o < inter, x + t * dim, dim, 1, round_input, tile, gate);
  block_row_dot<1>(w3[e], o, o < inter, x + t * dim, dim, 1, round_input, tile, up);
  if (o >= inter) return;
  const float g = fminf(warp_sum(gate[0]), limit), u = fminf(fmaxf(warp_sum(up[0]), -limit), limit);
  if ((threadIdx.x & 31) == 0) h[pair * inter + o] = g * (1.0f / (1.0f + expf(-g))) * u;
}

// grid (n·k, dim / warps): y[pair, o] = w2_e[o]·h[pair]
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    expert_down_kernel(const float* h, int64_t dim, int64_t inter, const int32_t* selected, const WeightRef* w2,
                       bool round_input, float* y) {
  __shared__ __align__(16) float tile[kTilePitch];
  const int64_t o = int64_t(blockIdx.y) * kWarpsPerBlock + threadIdx.x / 32;
  const int64_t pair = blockIdx.x;
  float acc[1] = {};
  block_row_dot<1>(w2[selected[pair]], o, o < dim, h + pair * inter, inter, 1, round_input, tile, acc);
  if (o >= dim) return;
  const float s = warp_sum(acc[0]);
  if ((threadIdx.x & 31) == 0) y[pair * dim + o] = s;
}

__global__ void combine_kernel(const float* y, const float* weights, int64_t n, int64_t k, int64_t dim, float* out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * dim) return;
  const int64_t t = i / dim, d = i % dim;
  float acc = 0;
  for (int64_t j = 0; j < k; ++j) acc += y[(t * k + j) * dim + d] * weights[t * k + j];
  out[i] = acc;
}

}  // namespace

void route(const float* logits, const float* bias, const int32_t* tid2eid, const int32_t* ids, int64_t n,
           const RouteParams& p, float* weights, int32_t* selected, cudaStream_t stream) {
  if (n == 0) return;
  const size_t shared = size_t(2 * p.experts) * sizeof(float);
  if (shared > 48 * 1024) runtime_error("cuda route: ", p.experts, " experts exceed the router's shared memory");
  route_kernel<<<unsigned(n), 128, shared, stream>>>(logits, bias, tid2eid, ids, p, weights, selected);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

void routed_experts(const float* x, int64_t n, int64_t dim, int64_t inter, const float* weights, const int32_t* selected,
                    int64_t k, const WeightRef* experts_w1, const WeightRef* experts_w2, const WeightRef* experts_w3,
                    float limit, bool round_input_to_bf16, float* scratch, float* out, cudaStream_t stream) {
  const int64_t pairs = n * k;
  if (pairs == 0) return;
  float* h = scratch;
  float* y = scratch + pairs * inter;
  const float lim = limit > 0 ? limit : INFINITY;
  expert_up_kernel<<<dim3(unsigned(pairs), unsigned((inter + kWarpsPerBlock - 1) / kWarpsPerBlock)), kWarpsPerBlock * 32, 0,
                     stream>>>(x, dim, inter, selected, k, experts_w1, experts_w3, lim, round_input_to_bf16, h);
  TETRA_CUDA_CHECK(cudaGetLastError());
  expert_down_kernel<<<dim3(unsigned(pairs), unsigned((dim + kWarpsPerBlock - 1) / kWarpsPerBlock)), kWarpsPerBlock * 32, 0,
                       stream>>>(h, dim, inter, selected, experts_w2, round_input_to_bf16, y);
  TETRA_CUDA_CHECK(cudaGetLastError());
  combine_kernel<<<unsigned((n * dim + 255) / 256), 256, 0, stream>>>(y, weights, n, k, dim, out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
