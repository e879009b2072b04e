#include "backend/cuda/mhc.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/reduce.cuh"

namespace tetra::cuda {
namespace {

constexpr int kMaxMix = (2 + kMaxHc) * kMaxHc;
constexpr int kThreads = 256;

__device__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// mixes[k] = (fn[k] · v) · rsqrt(mean(v²) + eps) for k < mix, v one row of h (block-wide).
__device__ void mix_row(const float* v, const float* fn, int mix, int64_t flat, float eps, float* mixes) {
  float dots[kMaxMix + 1] = {};
  for (int64_t i = threadIdx.x; i < flat; i += blockDim.x) {
    const float x = v[i];
    dots[kMaxMix] = fmaf(x, x, dots[kMaxMix]);
#pragma unroll
    for (int k = 0; k < kMaxMix; ++k)
      if (k < mix) dots[k] = fmaf(fn[k * flat + i], x, dots[k]);
  }
  const float rs = 1.0f / sqrtf(block_sum(dots[kMaxMix]) / float(flat) + eps);
#pragma unroll
  for (int k = 0; k < kMaxMix; ++k)
    if (k < mix) {
      const float s = block_sum(dots[k]);
      if (threadIdx.x == 0) mixes[k] = s * rs;
    }
}

__global__ void hc_pre_kernel(const float* h, const float* fn, const float* base, const float* scale, HcParams p,
                              float* x, float* post, float* comb) {
  __shared__ float mixes[kMaxMix];
  __shared__ float pre[kMaxHc];
  const int hc = int(p.hc), mix = (2 + hc) * hc;
  const int64_t r = blockIdx.x, flat = p.hc * p.dim;
  const float* v = h + r * flat;
  mix_row(v, fn, mix, flat, p.norm_eps, mixes);
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 0; i < hc; ++i) {
      pre[i] = sigmoid(mixes[i] * scale[0] + base[i]) + p.hc_eps;
      post[r * hc + i] = 2 * sigmoid(mixes[hc + i] * scale[1] + base[hc + i]);
    }
    float c[kMaxHc * kMaxHc];
    for (int k = 0; k < hc * hc; ++k) c[k] = mixes[2 * hc + k] * scale[2] + base[2 * hc + k];
    for (int i = 0; i < hc; ++i) {  // row softmax, then + eps
      float m = -INFINITY, s = 0;
      for (int j = 0; j < hc; ++j) m = fmaxf(m, c[i * hc + j]);
      for (int j = 0; j < hc; ++j) s += (c[i * hc + j] = expf(c[i * hc + j] - m));
      for (int j = 0; j < hc; ++j) c[i * hc + j] = c[i * hc + j] / s + p.hc_eps;
    }
    for (int64_t it = 0; it < max(p.sinkhorn_iters, int64_t(1)); ++it) {
      if (it > 0)
        for (int i = 0; i < hc; ++i) {
          float s = 0;
          for (int j = 0; j < hc; ++j) s += c[i * hc + j];
          for (int j = 0; j < hc; ++j) c[i * hc + j] /= s + p.hc_eps;
        }
      for (int j = 0; j < hc; ++j) {
        float s = 0;
        for (int i = 0; i < hc; ++i) s += c[i * hc + j];
        for (int i = 0; i < hc; ++i) c[i * hc + j] /= s + p.hc_eps;
      }
    }
    for (int k = 0; k < hc * hc; ++k) comb[r * hc * hc + k] = c[k];
  }
  __syncthreads();
  for (int64_t k = threadIdx.x; k < p.dim; k += blockDim.x) {
    float s = 0;
    for (int i = 0; i < hc; ++i) s += pre[i] * v[i * p.dim + k];
    x[r * p.dim + k] = s;
  }
}

__global__ void hc_head_kernel(const float* h, const float* fn, const float* base, const float* scale, HcParams p,
                               float* x) {
  __shared__ float mixes[kMaxMix];
  __shared__ float pre[kMaxHc];
  const int hc = int(p.hc);
  const int64_t r = blockIdx.x, flat = p.hc * p.dim;
  const float* v = h + r * flat;
  mix_row(v, fn, hc, flat, p.norm_eps, mixes);
  __syncthreads();
  if (threadIdx.x < hc) pre[threadIdx.x] = sigmoid(mixes[threadIdx.x] * scale[0] + base[threadIdx.x]) + p.hc_eps;
  __syncthreads();
  for (int64_t k = threadIdx.x; k < p.dim; k += blockDim.x) {
    float s = 0;
    for (int i = 0; i < hc; ++i) s += pre[i] * v[i * p.dim + k];
    x[r * p.dim + k] = s;
  }
}

__global__ void hc_post_kernel(const float* h, const float* y, const float* post, const float* comb, int64_t n, int64_t hc,
                               int64_t dim, float* out) {
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n * hc * dim) return;
  const int64_t d = k % dim, j = (k / dim) % hc, r = k / (dim * hc);
  float s = post[r * hc + j] * y[r * dim + d];
  for (int64_t i = 0; i < hc; ++i) s += comb[(r * hc + i) * hc + j] * h[(r * hc + i) * dim + d];
  out[k] = s;
}

void check_hc(const HcParams& p) {
  if (p.hc < 1 || p.hc > kMaxHc) runtime_error("cuda mHC: hc_mult ", p.hc, " is not supported (at most ", kMaxHc, ")");
}

}  // namespace

void hc_pre(const float* h, const float* fn, const float* base, const float* scale, int64_t n, const HcParams& p,
            float* x, float* post, float* comb, cudaStream_t stream) {
  check_hc(p);
  if (n == 0) return;
  hc_pre_kernel<<<unsigned(n), kThreads, 0, stream>>>(h, fn, base, scale, p, x, post, comb);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

void hc_post(const float* h, const float* y, const float* post, const float* comb, int64_t n, int64_t hc, int64_t dim,
             float* out, cudaStream_t stream) {
  const int64_t total = n * hc * dim;
  if (total == 0) return;
  hc_post_kernel<<<unsigned((total + 255) / 256), 256, 0, stream>>>(h, y, post, comb, n, hc, dim, out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

void hc_head(const float* h, const float* fn, const float* base, const float* scale, int64_t n, const HcParams& p,
             float* x, cudaStream_t stream) {
  check_hc(p);
  if (n == 0) return;
  hc_head_kernel<<<unsigned(n), kThreads, 0, stream>>>(h, fn, base, scale, p, x);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
