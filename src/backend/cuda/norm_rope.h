#pragma once
// RMSNorm (f32) and interleaved RoPE.
#include <cuda_runtime.h>

#include <cstdint>

namespace tetra::cuda {

// y = x · rsqrt(mean(x²) + eps) · weight over each run of `group` values (weight may be null).
void rms_norm(const float* x, const float* weight, int64_t runs, int64_t group, float eps, float* y, cudaStream_t stream);

// rms_norm over each head_dim run of x [rows, heads·head_dim], then rope (not inverse) on it, in
// one pass. Returns false, launching nothing, where the fused kernel does not apply (head_dim not
// a multiple of 4, unaligned tensors): the caller then runs the two ops.
bool rms_norm_rope(const float* x, const float* weight, int64_t rows, int64_t heads, int64_t head_dim, float eps,
                   const int32_t* positions, const float* inv_freq, int64_t half, float* y, cudaStream_t stream);

// rms_norm_rope of up to kMaxNormParts tensors at the same rows and positions in one launch (part
// p: x [rows, heads·head_dim], its weight (may be null), y). Returns false, launching nothing,
// where the fused kernel does not apply to every part (as rms_norm_rope) or head_dim is above
// 1024: the caller then runs them one by one.
constexpr int kMaxNormParts = 2;
struct NormRopePart {
  const float* x;
  const float* weight;
  int64_t heads;
  float* y;
};
bool rms_norm_ropes(const NormRopePart* parts, int count, int64_t rows, int64_t head_dim, float eps,
                    const int32_t* positions, const float* inv_freq, int64_t half, cudaStream_t stream);

// Rotates pairs (2i, 2i+1) of the last 2·half dims of every head_dim run of row r by
// ±positions[r]·inv_freq[i], in place; x is [rows, heads·head_dim].
void rope(float* x, const int32_t* positions, const float* inv_freq, int64_t rows, int64_t heads, int64_t head_dim,
          int64_t half, bool inverse, cudaStream_t stream);

}  // namespace tetra::cuda
