#include "backend/cuda/moe_grouped.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cub/device/device_radix_sort.cuh>
#include <vector>

#include "backend/cuda/expert_gemm.h"
#include "backend/cuda/pool_buffer.h"
#include "backend/cuda/swiglu.cuh"

namespace tetra::cuda {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(int64_t work) { return unsigned(std::min<int64_t>((work + kThreads - 1) / kThreads, 65536)); }

// index[p] = p, checking that every selection names an expert; with expert_key, keys[p] =
// expert_key[selected[p]] (the experts another rank holds sort last, past every expert's rows).
__global__ void iota_kernel(const int32_t* selected, int64_t pairs, int64_t experts, const int32_t* expert_key,
                            int32_t* index, int32_t* keys) {
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < pairs; p += int64_t(gridDim.x) * blockDim.x) {
    if (selected[p] < 0 || selected[p] >= experts) __trap();
    index[p] = int32_t(p);
    if (expert_key) keys[p] = expert_key[selected[p]];
  }
}

// offsets[e] = first sorted position of expert e (lower bound), offsets[experts] = pairs;
// slot_of_pair[order[i]] = i.
__global__ void offsets_kernel(const uint32_t* sorted_experts, const int32_t* order, int64_t pairs, int64_t experts,
                               int32_t* offsets, int32_t* slot_of_pair) {
  const int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (t <= experts) {
    int64_t lo = 0, hi = pairs;
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (int64_t(sorted_experts[mid]) < t) lo = mid + 1;
      else hi = mid;
    }
    offsets[t] = int32_t(lo);
  }
  for (int64_t i = t; i < pairs; i += int64_t(gridDim.x) * blockDim.x) slot_of_pair[order[i]] = int32_t(i);
}

__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }

// h[i, o] = swiglu(up[i, o]·α1, up[i, inter + o]·α3) with the limit, for the expert of sorted row i.
template <class T>
__global__ void swiglu_kernel(const float* up, const uint32_t* sorted_experts, const float* up_alpha, int64_t rows,
                              int64_t inter, float limit, T* h) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < rows * inter; k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = k / inter, o = k % inter;
    const uint32_t e = sorted_experts[i];
    const float gate = up[i * 2 * inter + o] * up_alpha[2 * e], value = up[i * 2 * inter + inter + o] * up_alpha[2 * e + 1];
    store(h + k, clamped_swiglu(gate, value, limit));
  }
}

// out[t, d] = Σ_j weights[t, j] · y[slot_of_pair[t·k + j], d], j in slot order; blocks over the
// tokens, threads over d.
__global__ void combine_kernel(const float* y, const int32_t* slot_of_pair, const float* weights, int64_t n, int64_t k,
                               int64_t dim, float* out) {
  for (int64_t t = blockIdx.x; t < n; t += gridDim.x)
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
      float acc = 0;
      for (int64_t j = 0; j < k; ++j)
        acc += y[int64_t(slot_of_pair ? slot_of_pair[t * k + j] : t * k + j) * dim + d] * weights[t * k + j];
      out[t * dim + d] = acc;
    }
}

// combine_kernel four dims a thread with every pair's row requested before the sums (up to
// kCombinePairs pairs a token): a thread of the one-value kernel waited on its k loads one after
// another (a prefill's 8192 × 6 rows: 0.32 ms a layer, ~70% of its bytes' time). Each dim's sum
// is the same expression in the same order: the same bits.
constexpr int kCombinePairs = 8;
__global__ void combine4_kernel(const float4* y, const int32_t* slot_of_pair, const float* weights, int64_t n, int k,
                                int64_t quads, float4* out) {
  for (int64_t t = blockIdx.x; t < n; t += gridDim.x) {
    int64_t row[kCombinePairs];
    float w[kCombinePairs];
#pragma unroll
    for (int j = 0; j < kCombinePairs; ++j)
      if (j < k) row[j] = int64_t(slot_of_pair ? slot_of_pair[t * k + j] : t * k + j) * quads, w[j] = weights[t * k + j];
    for (int64_t q = threadIdx.x; q < quads; q += blockDim.x) {
      float4 v[kCombinePairs];
#pragma unroll
      for (int j = 0; j < kCombinePairs; ++j)
        if (j < k) v[j] = y[row[j] + q];
      float4 acc = make_float4(0, 0, 0, 0);
#pragma unroll
      for (int j = 0; j < kCombinePairs; ++j)
        if (j < k) acc.x += v[j].x * w[j], acc.y += v[j].y * w[j], acc.z += v[j].z * w[j], acc.w += v[j].w * w[j];
      out[t * quads + q] = acc;
    }
  }
}

// slot_of_pair null: y is in slot order.
void combine(const float* y, const int32_t* slot_of_pair, const float* weights, int64_t n, int64_t k, int64_t dim,
             float* out, cudaStream_t stream) {
  const unsigned blocks = unsigned(std::min<int64_t>(n, 65536));
  if (k <= kCombinePairs && dim % 4 == 0 && (reinterpret_cast<uintptr_t>(y) | reinterpret_cast<uintptr_t>(out)) % 16 == 0)
    combine4_kernel<<<blocks, kThreads, 0, stream>>>(reinterpret_cast<const float4*>(y), slot_of_pair, weights, n,
                                                     int(k), dim / 4, reinterpret_cast<float4*>(out));
  else
    combine_kernel<<<blocks, kThreads, 0, stream>>>(y, slot_of_pair, weights, n, k, dim, out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

// slots[p] = y[slot_of_pair[p]] for the pairs of the experts held here (sorted before
// offsets[experts]), zeros for the others.
__global__ void slot_order_kernel(const float* y, const int32_t* slot_of_pair, const int32_t* offsets, int64_t experts,
                                  int64_t pairs, int64_t dim, float* slots) {
  const int32_t held = offsets[experts];
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < pairs * dim; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t p = i / dim, row = slot_of_pair[p];
    slots[i] = row < held ? y[row * dim + i % dim] : 0.0f;
  }
}

}  // namespace

namespace {

// Each pair's expert output, in expert-sorted rows: y [pairs, dim] (rows past offsets[experts]:
// pairs of experts held elsewhere, unwritten), slot_of_pair [pairs] its sorted row, offsets
// [experts + 1]. Buffers from the stream's pool, returned to it with the call's work queued.
struct SortedPairs {
  PoolBuffer y, slot_of_pair, offsets;
};
SortedPairs expert_rows(DequantGemm& gemm, const GroupedExperts& e, const float* x, int64_t n, const int32_t* selected,
                        int64_t k, float limit, bool round_input) {
  const int64_t pairs = n * k;
  const cudaStream_t stream = gemm.stream();
  const OperandType type = round_input ? OperandType::bf16 : OperandType::f32;
  const size_t bytes = operand_bytes(type);
  const float lim = limit > 0 ? limit : INFINITY;

  // Group the pairs by expert: a stable sort keeps each expert's pairs in token order. Experts
  // held elsewhere (key `experts`) sort after every expert's rows, which no GEMM reads.
  PoolBuffer index(size_t(pairs) * 4, stream), order(size_t(pairs) * 4, stream), sorted(size_t(pairs) * 4, stream);
  PoolBuffer held_keys(e.expert_key ? size_t(pairs) * 4 : 4, stream);
  SortedPairs out{PoolBuffer(size_t(pairs * std::max(2 * e.inter, e.dim)) * 4, stream), PoolBuffer(size_t(pairs) * 4, stream),
                  PoolBuffer(size_t(e.experts + 1) * 4, stream)};
  iota_kernel<<<grid_for(pairs), kThreads, 0, stream>>>(selected, pairs, e.experts, e.expert_key, index.get<int32_t>(),
                                                        held_keys.get<int32_t>());
  TETRA_CUDA_CHECK(cudaGetLastError());
  const int64_t key_end = e.expert_key ? e.experts + 1 : e.experts;
  int end_bit = 1;
  while ((int64_t(1) << end_bit) < key_end) ++end_bit;
  // non-negative: checked above
  const auto* keys = reinterpret_cast<const uint32_t*>(e.expert_key ? held_keys.get<int32_t>() : selected);
  size_t temp_bytes = 0;
  TETRA_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys, sorted.get<uint32_t>(), index.get<int32_t>(),
                                                   order.get<int32_t>(), pairs, 0, end_bit, stream));
  PoolBuffer temp(std::max<size_t>(temp_bytes, 1), stream);
  TETRA_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, keys, sorted.get<uint32_t>(),
                                                   index.get<int32_t>(), order.get<int32_t>(), pairs, 0, end_bit, stream));
  offsets_kernel<<<grid_for(std::max(pairs, e.experts + 1)), kThreads, 0, stream>>>(
      sorted.get<uint32_t>(), order.get<int32_t>(), pairs, e.experts, out.offsets.get<int32_t>(),
      out.slot_of_pair.get<int32_t>());
  TETRA_CUDA_CHECK(cudaGetLastError());
  if (round_input && expert_gemm_supported(e.layout, e.experts, e.w1, e.w2, e.w3, x)) {
    expert_gemms({e.experts, e.dim, e.inter, e.layout.up.format, e.device_w1, e.device_w2, e.device_w3}, x, n, k,
                 order.get<int32_t>(), out.offsets.get<int32_t>(), lim, out.y.get<float>(), stream);
    return out;
  }

  // cuBLAS needs each expert's row count on the host: the path's one synchronization.
  std::vector<int32_t> first(size_t(e.experts + 1));
  TETRA_CUDA_CHECK(cudaMemcpyAsync(first.data(), out.offsets.get(), first.size() * 4, cudaMemcpyDeviceToHost, stream));
  TETRA_CUDA_CHECK(cudaStreamSynchronize(stream));
  const int64_t rows_here = first.back();  // the pairs of the experts held here

  // A: the pairs' token rows in expert order; up: [pairs, 2·inter] f32, reused for w2's output.
  PoolBuffer a(size_t(pairs * e.dim) * bytes, stream);
  gather_expert_rows(x, e.dim, order.get<int32_t>(), rows_here, k, type, a.get(), stream);
  PoolBuffer& up = out.y;
  for (int64_t ex = 0; ex < e.experts; ++ex) {
    const int64_t row0 = first[size_t(ex)], rows = first[size_t(ex) + 1] - row0;
    if (rows > 0)
      gemm.multiply({e.w1[ex], e.w3[ex]}, 1.0f, a.get<std::byte>() + size_t(row0 * e.dim) * bytes, type, rows,
                    up.get<float>() + row0 * 2 * e.inter, 2 * e.inter);
  }
  PoolBuffer h(size_t(pairs * e.inter) * bytes, stream);
  if (rows_here > 0) {
    if (round_input)
      swiglu_kernel<<<grid_for(rows_here * e.inter), kThreads, 0, stream>>>(up.get<float>(), sorted.get<uint32_t>(),
                                                                            e.up_alpha, rows_here, e.inter, lim,
                                                                            h.get<__nv_bfloat16>());
    else
      swiglu_kernel<<<grid_for(rows_here * e.inter), kThreads, 0, stream>>>(up.get<float>(), sorted.get<uint32_t>(),
                                                                            e.up_alpha, rows_here, e.inter, lim,
                                                                            h.get<float>());
    TETRA_CUDA_CHECK(cudaGetLastError());
  }
  float* y = up.get<float>();  // the SwiGLU pass has consumed `up`
  for (int64_t ex = 0; ex < e.experts; ++ex) {
    const int64_t row0 = first[size_t(ex)], rows = first[size_t(ex) + 1] - row0;
    if (rows > 0)
      gemm.multiply({e.w2[ex]}, e.w2_alpha[ex], h.get<std::byte>() + size_t(row0 * e.inter) * bytes, type, rows,
                    y + row0 * e.dim, e.dim);
  }
  return out;
}

}  // namespace

void grouped_experts(DequantGemm& gemm, const GroupedExperts& e, const float* x, int64_t n, const float* weights,
                     const int32_t* selected, int64_t k, float limit, bool round_input, float* out) {
  if (n * k == 0) return;
  const SortedPairs p = expert_rows(gemm, e, x, n, selected, k, limit, round_input);
  combine(p.y.get<float>(), p.slot_of_pair.get<int32_t>(), weights, n, k, e.dim, out, gemm.stream());
}

void grouped_expert_slots(DequantGemm& gemm, const GroupedExperts& e, const float* x, int64_t n, const int32_t* selected,
                          int64_t k, float limit, bool round_input, float* slots) {
  const int64_t pairs = n * k;
  if (pairs == 0) return;
  const SortedPairs p = expert_rows(gemm, e, x, n, selected, k, limit, round_input);
  slot_order_kernel<<<grid_for(pairs * e.dim), kThreads, 0, gemm.stream()>>>(
      p.y.get<float>(), p.slot_of_pair.get<int32_t>(), p.offsets.get<int32_t>(), e.experts, pairs, e.dim, slots);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
