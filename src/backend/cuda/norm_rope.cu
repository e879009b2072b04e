#include "backend/cuda/norm_rope.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/reduce.cuh"

namespace tetra::cuda {
namespace {

__global__ void rms_norm_kernel(const float* x, const float* weight, int64_t group, float eps, float* y) {
  const float* v = x + int64_t(blockIdx.x) * group;
  float* out = y + int64_t(blockIdx.x) * group;
  float s = 0;
  for (int64_t i = threadIdx.x; i < group; i += blockDim.x) s = fmaf(v[i], v[i], s);
  const float r = 1.0f / sqrtf(block_sum(s) / float(group) + eps);
  for (int64_t i = threadIdx.x; i < group; i += blockDim.x) out[i] = v[i] * r * (weight ? weight[i] : 1.0f);
}

__global__ void rope_kernel(float* x, const int32_t* positions, const float* inv_freq, int64_t rows, int64_t heads,
                            int64_t head_dim, int64_t half, bool inverse) {
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= rows * heads * half) return;
  const int64_t i = k % half, h = (k / half) % heads, r = k / (half * heads);
  const float angle = inv_freq[i] * float(positions[r]);  // f32, as the reference computes it
  const float c = cosf(angle), s = inverse ? -sinf(angle) : sinf(angle);
  float* p = x + (r * heads + h) * head_dim + head_dim - 2 * half + 2 * i;
  const float a = p[0], b = p[1];
  p[0] = a * c - b * s;
  p[1] = b * c + a * s;
}

}  // namespace

void rms_norm(const float* x, const float* weight, int64_t runs, int64_t group, float eps, float* y, cudaStream_t stream) {
  if (runs == 0) return;
  rms_norm_kernel<<<unsigned(runs), 256, 0, stream>>>(x, weight, group, eps, y);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

void rope(float* x, const int32_t* positions, const float* inv_freq, int64_t rows, int64_t heads, int64_t head_dim,
          int64_t half, bool inverse, cudaStream_t stream) {
  const int64_t n = rows * heads * half;
  if (n == 0) return;
  rope_kernel<<<unsigned((n + 255) / 256), 256, 0, stream>>>(x, positions, inv_freq, rows, heads, head_dim, half, inverse);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
