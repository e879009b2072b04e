#pragma once
// Sparse attention with per-head sinks over gathered key rows (K = V), f32.
#include <cuda_runtime.h>

#include <cstdint>

namespace tetra::cuda {

// Row r of q [n, heads·d] attends to kv rows idx[r, 0..K) (-1: none); sinks [heads] join only
// the softmax denominator. scratch: n·heads·K floats. out [n, heads·d].
void sparse_attention(const float* q, const float* kv, const int32_t* idx, const float* sinks, int64_t n, int64_t heads,
                      int64_t d, int64_t K, float scale, float* scratch, float* out, cudaStream_t stream);

}  // namespace tetra::cuda
