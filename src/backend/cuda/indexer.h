#pragma once
// Lightning indexer top-k on the device (f32 scores, deterministic selection).
#include <cuda_runtime.h>

#include <cstdint>

namespace tetra::cuda {

// Per query row r: score(c) = Σ_h relu(q[r,h]·keys[key_begin[r]+c]) · weights[r,h] · weight_scale
// for c < visible[r]; out[r, 0..k) = the best min(k, visible[r]) entries by descending score
// (ties: lower c), then -1. scratch: n·scratch_stride floats, scratch_stride >= every visible[r].
void indexer_topk(const float* q, const float* weights, const float* keys, const int32_t* key_begin,
                  const int32_t* visible, int64_t n, int64_t heads, int64_t d, int64_t k, float weight_scale,
                  float* scratch, int64_t scratch_stride, int32_t* out, cudaStream_t stream);

}  // namespace tetra::cuda
