#include "backend/cuda/mhc.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/launch.cuh"

namespace tetra::cuda {
namespace {

constexpr int kMaxMix = (2 + kMaxHc) * kMaxHc;
constexpr int kSums = kMaxMix + 1;  // the mixes' dot products, then Σv²
constexpr int kThreads = 256;
// The mix pass splits each row into slices of a fixed length, one block per (rows, slice), so a
// decode step's single row spreads over the GPU; the slices' partial sums are added in slice
// order by the finishing kernels, the same order whatever the batch.
constexpr int64_t kSliceLength = 512;
constexpr int64_t kDimPerBlock = 1024;  // output columns per block of the finishing kernels
constexpr int64_t kMaxSlices = 64;      // hc·dim up to 32768

__device__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

int64_t slice_count(const HcParams& p) { return (p.hc * p.dim + kSliceLength - 1) / kSliceLength; }

// partial[r][slice][k] = Σ over the slice of fn[k]·v (k < mix), and of v² at k = kMaxMix, for
// Rows rows per block (the rows share each fn load; a row's sums do not depend on its neighbours).
template <int Rows>
__global__ void __launch_bounds__(kThreads)
    hc_mix_kernel(const float* h, const float* fn, int64_t n, int mix, int64_t flat, float* partial) {
  allow_next_kernel();
  __shared__ float warp_sums[kThreads / 32][Rows][kSums];
  const int64_t r0 = int64_t(blockIdx.x) * Rows, slice = blockIdx.y, slices = gridDim.y;
  const int64_t begin = slice * kSliceLength, end = min(begin + kSliceLength, flat);
  float dots[Rows][kSums] = {};
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    float x[Rows];
#pragma unroll
    for (int j = 0; j < Rows; ++j) {
      x[j] = r0 + j < n ? h[(r0 + j) * flat + i] : 0.0f;
      dots[j][kMaxMix] = fmaf(x[j], x[j], dots[j][kMaxMix]);
    }
#pragma unroll
    for (int k = 0; k < kMaxMix; ++k)
      if (k < mix) {
        const float w = fn[k * flat + i];
#pragma unroll
        for (int j = 0; j < Rows; ++j) dots[j][k] = fmaf(w, x[j], dots[j][k]);
      }
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
#pragma unroll
  for (int j = 0; j < Rows; ++j)
#pragma unroll
    for (int k = 0; k < kSums; ++k) {
      const float v = warp_sum(dots[j][k]);
      if (lane == 0) warp_sums[warp][j][k] = v;
    }
  __syncthreads();
  for (int t = threadIdx.x; t < Rows * kSums; t += blockDim.x) {
    const int j = t / kSums, k = t % kSums;
    if (r0 + j >= n) continue;
    float s = 0;
    for (int w = 0; w < kThreads / 32; ++w) s += warp_sums[w][j][k];
    partial[((r0 + j) * slices + slice) * kSums + k] = s;
  }
}

// mixes[k] = (fn[k] · v) · rsqrt(mean(v²) + eps) for k < mix, from row r's slice sums (block-wide):
// every thread loads some of the row's partial sums at once, then each sum adds its slices in order.
__device__ void gather_mixes(const float* partial, int64_t r, int64_t slices, int mix, int64_t flat, float eps,
                             float* mixes) {
  __shared__ float staged[kMaxSlices * kSums];
  __shared__ float sums[kSums];
  for (int64_t i = threadIdx.x; i < slices * kSums; i += blockDim.x) staged[i] = partial[r * slices * kSums + i];
  __syncthreads();
  if (threadIdx.x < kSums) {
    float s = 0;
    for (int64_t j = 0; j < slices; ++j) s += staged[j * kSums + threadIdx.x];
    sums[threadIdx.x] = s;
  }
  __syncthreads();
  const float rs = 1.0f / sqrtf(sums[kMaxMix] / float(flat) + eps);
  if (threadIdx.x < mix) mixes[threadIdx.x] = sums[threadIdx.x] * rs;
  __syncthreads();
}

// x[r, k] = Σ_i pre[i]·h[r, i, k] over this block's columns
__device__ void mix_streams(const float* v, const float* pre, int hc, int64_t dim, float* x) {
  const int64_t begin = int64_t(blockIdx.y) * kDimPerBlock, end = min(begin + kDimPerBlock, dim);
  for (int64_t k = begin + threadIdx.x; k < end; k += blockDim.x) {
    float s = 0;
    for (int i = 0; i < hc; ++i) s += pre[i] * v[i * dim + k];
    x[k] = s;
  }
}

// grid (rows, column blocks): every block derives the row's pre/post/comb (a few hundred flops,
// unrolled for the stream count HC so that the Sinkhorn matrix stays in registers), the first
// column block writes post and comb.
template <int HC>
__global__ void __launch_bounds__(kThreads)
    hc_pre_finish_kernel(const float* h, const float* partial, int64_t slices, const float* base, const float* scale,
                         HcParams p, float* x, float* post, float* comb) {
  allow_next_kernel();
  __shared__ float mixes[kMaxMix];
  __shared__ float pre[HC];
  constexpr int mix = (2 + HC) * HC;
  const int64_t r = blockIdx.x, flat = HC * p.dim;
  gather_mixes(partial, r, slices, mix, flat, p.norm_eps, mixes);
  if (threadIdx.x == 0) {
    const bool writes = blockIdx.y == 0;
#pragma unroll
    for (int i = 0; i < HC; ++i) {
      pre[i] = sigmoid(mixes[i] * scale[0] + base[i]) + p.hc_eps;
      if (writes) post[r * HC + i] = 2 * sigmoid(mixes[HC + i] * scale[1] + base[HC + i]);
    }
    float c[HC][HC];
#pragma unroll
    for (int i = 0; i < HC; ++i) {  // row softmax, then + eps
      float m = -INFINITY, s = 0;
#pragma unroll
      for (int j = 0; j < HC; ++j) m = fmaxf(m, c[i][j] = mixes[2 * HC + i * HC + j] * scale[2] + base[2 * HC + i * HC + j]);
#pragma unroll
      for (int j = 0; j < HC; ++j) s += (c[i][j] = expf(c[i][j] - m));
#pragma unroll
      for (int j = 0; j < HC; ++j) c[i][j] = c[i][j] / s + p.hc_eps;
    }
    for (int64_t it = 0; it < max(p.sinkhorn_iters, int64_t(1)); ++it) {
      if (it > 0)
#pragma unroll
        for (int i = 0; i < HC; ++i) {
          float s = 0;
#pragma unroll
          for (int j = 0; j < HC; ++j) s += c[i][j];
#pragma unroll
          for (int j = 0; j < HC; ++j) c[i][j] /= s + p.hc_eps;
        }
#pragma unroll
      for (int j = 0; j < HC; ++j) {
        float s = 0;
#pragma unroll
        for (int i = 0; i < HC; ++i) s += c[i][j];
#pragma unroll
        for (int i = 0; i < HC; ++i) c[i][j] /= s + p.hc_eps;
      }
    }
    if (writes)
#pragma unroll
      for (int i = 0; i < HC; ++i)
#pragma unroll
        for (int j = 0; j < HC; ++j) comb[(r * HC + i) * HC + j] = c[i][j];
  }
  __syncthreads();
  mix_streams(h + r * flat, pre, HC, p.dim, x + r * p.dim);
}

__global__ void __launch_bounds__(kThreads)
    hc_head_finish_kernel(const float* h, const float* partial, int64_t slices, const float* base, const float* scale,
                          HcParams p, float* x) {
  allow_next_kernel();
  __shared__ float mixes[kMaxMix];
  __shared__ float pre[kMaxHc];
  const int hc = int(p.hc);
  const int64_t r = blockIdx.x, flat = p.hc * p.dim;
  gather_mixes(partial, r, slices, hc, flat, p.norm_eps, mixes);
  if (threadIdx.x < hc) pre[threadIdx.x] = sigmoid(mixes[threadIdx.x] * scale[0] + base[threadIdx.x]) + p.hc_eps;
  __syncthreads();
  mix_streams(h + r * flat, pre, hc, p.dim, x + r * p.dim);
}

__global__ void hc_post_kernel(const float* h, const float* y, const float* post, const float* comb, int64_t n, int64_t hc,
                               int64_t dim, float* out) {
  allow_next_kernel();
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n * hc * dim) return;
  const int64_t d = k % dim, j = (k / dim) % hc, r = k / (dim * hc);
  float s = post[r * hc + j] * y[r * dim + d];
  for (int64_t i = 0; i < hc; ++i) s += comb[(r * hc + i) * hc + j] * h[(r * hc + i) * dim + d];
  out[k] = s;
}

void check_hc(const HcParams& p) {
  if (p.hc < 1 || p.hc > kMaxHc) runtime_error("cuda mHC: hc_mult ", p.hc, " is not supported (at most ", kMaxHc, ")");
  if (slice_count(p) > kMaxSlices)
    runtime_error("cuda mHC: hc_mult·dim ", p.hc * p.dim, " is above ", kMaxSlices * kSliceLength);
}

// The mix pass over n rows: Rows per block once there are enough rows to share the fn loads.
void launch_mix(const float* h, const float* fn, int64_t n, int mix, const HcParams& p, float* partial,
                cudaStream_t stream) {
  const int64_t flat = p.hc * p.dim;
  const unsigned slices = unsigned(slice_count(p));
  if (n < 4)
    hc_mix_kernel<1><<<dim3(unsigned(n), slices), kThreads, 0, stream>>>(h, fn, n, mix, flat, partial);
  else
    hc_mix_kernel<4><<<dim3(unsigned((n + 3) / 4), slices), kThreads, 0, stream>>>(h, fn, n, mix, flat, partial);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

dim3 finish_grid(int64_t n, const HcParams& p) {
  return dim3(unsigned(n), unsigned((p.dim + kDimPerBlock - 1) / kDimPerBlock));
}

}  // namespace

int64_t hc_scratch_floats(int64_t n, const HcParams& p) { return n * slice_count(p) * kSums; }

void hc_pre(const float* h, const float* fn, const float* base, const float* scale, int64_t n, const HcParams& p,
            float* scratch, float* x, float* post, float* comb, cudaStream_t stream) {
  check_hc(p);
  if (n == 0) return;
  launch_mix(h, fn, n, int((2 + p.hc) * p.hc), p, scratch, stream);
  auto finish = [&](auto kernel) {
    kernel<<<finish_grid(n, p), kThreads, 0, stream>>>(h, scratch, slice_count(p), base, scale, p, x, post, comb);
  };
  switch (p.hc) {
    case 1: finish(hc_pre_finish_kernel<1>); break;
    case 2: finish(hc_pre_finish_kernel<2>); break;
    case 3: finish(hc_pre_finish_kernel<3>); break;
    default: finish(hc_pre_finish_kernel<4>); break;
  }
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
             float* scratch, float* x, cudaStream_t stream) {
  check_hc(p);
  if (n == 0) return;
  launch_mix(h, fn, n, int(p.hc), p, scratch, stream);
  hc_head_finish_kernel<<<finish_grid(n, p), kThreads, 0, stream>>>(h, scratch, slice_count(p), base, scale, p, x);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
