#include "backend/cuda/norm_rope.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/launch.cuh"

namespace tetra::cuda {
namespace {

constexpr int kNormThreads = 512;

// Longer runs: one block per run. Rows whose length is a multiple of 4 (and 16-byte aligned) are read as
// float4; the loads of a thread's elements are unrolled so that they are in flight together.
template <typename Vec>
__global__ void __launch_bounds__(kNormThreads)
    rms_norm_kernel(const float* x, const float* weight, int64_t group, float eps, float* y) {
  allow_next_kernel();
  constexpr int kLanes = sizeof(Vec) / sizeof(float);
  const int vecs = int(group / kLanes);
  const Vec* v = reinterpret_cast<const Vec*>(x + int64_t(blockIdx.x) * group);
  Vec* out = reinterpret_cast<Vec*>(y + int64_t(blockIdx.x) * group);
  float s = 0;
#pragma unroll 4
  for (int i = threadIdx.x; i < vecs; i += kNormThreads) {
    const Vec a = v[i];
    const float* e = reinterpret_cast<const float*>(&a);
#pragma unroll
    for (int l = 0; l < kLanes; ++l) s = fmaf(e[l], e[l], s);
  }
  const float r = 1.0f / sqrtf(block_sum(s) / float(group) + eps);
#pragma unroll 4
  for (int i = threadIdx.x; i < vecs; i += kNormThreads) {
    Vec a = v[i];
    float* e = reinterpret_cast<float*>(&a);
    const float* w = weight ? reinterpret_cast<const float*>(reinterpret_cast<const Vec*>(weight) + i) : nullptr;
#pragma unroll
    for (int l = 0; l < kLanes; ++l) e[l] = e[l] * r * (w ? w[l] : 1.0f);
    out[i] = a;
  }
}

// Runs of up to kWarpRunMax values: one warp per run, kWarpRuns runs to a block (a 512-thread block
// per 512-value run left three quarters of its threads idle and synchronized twice: 1.6 ms for
// V4-Flash's per-head query norm over 8192 rows). Each lane adds its values in order, then one
// warp-wide sum; the kernel depends on the run length only, so a run's result does not depend
// on how many runs share the launch.
constexpr int kWarpRuns = 8;
constexpr int64_t kWarpRunMax = 1024;

template <typename Vec>
__global__ void __launch_bounds__(kWarpRuns * 32)
    rms_norm_warp_kernel(const float* x, const float* weight, int64_t runs, int64_t group, float eps, float* y) {
  allow_next_kernel();
  constexpr int kLanes = sizeof(Vec) / sizeof(float);
  const int64_t run = int64_t(blockIdx.x) * kWarpRuns + threadIdx.x / 32;
  if (run >= runs) return;
  const int lane = threadIdx.x & 31, vecs = int(group / kLanes);
  const Vec* v = reinterpret_cast<const Vec*>(x + run * group);
  Vec* out = reinterpret_cast<Vec*>(y + run * group);
  float s = 0;
#pragma unroll 4
  for (int i = lane; i < vecs; i += 32) {
    const Vec a = v[i];
    const float* e = reinterpret_cast<const float*>(&a);
#pragma unroll
    for (int l = 0; l < kLanes; ++l) s = fmaf(e[l], e[l], s);
  }
  const float r = 1.0f / sqrtf(warp_sum(s) / float(group) + eps);
#pragma unroll 4
  for (int i = lane; i < vecs; i += 32) {
    Vec a = v[i];
    float* e = reinterpret_cast<float*>(&a);
    const float* w = weight ? reinterpret_cast<const float*>(reinterpret_cast<const Vec*>(weight) + i) : nullptr;
#pragma unroll
    for (int l = 0; l < kLanes; ++l) e[l] = e[l] * r * (w ? w[l] : 1.0f);
    out[i] = a;
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

__global__ void rope_kernel(float* x, const int32_t* positions, const float* inv_freq, int64_t rows, int64_t heads,
                            int64_t head_dim, int64_t half, bool inverse) {
  allow_next_kernel();
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
  const bool vec4 = group % 4 == 0 && aligned16(x) && aligned16(y) && (!weight || aligned16(weight));
  if (group <= kWarpRunMax) {
    const unsigned blocks = unsigned((runs + kWarpRuns - 1) / kWarpRuns);
    if (vec4)
      rms_norm_warp_kernel<float4><<<blocks, kWarpRuns * 32, 0, stream>>>(x, weight, runs, group, eps, y);
    else
      rms_norm_warp_kernel<float><<<blocks, kWarpRuns * 32, 0, stream>>>(x, weight, runs, group, eps, y);
  } else if (vec4) {
    rms_norm_kernel<float4><<<unsigned(runs), kNormThreads, 0, stream>>>(x, weight, group, eps, y);
  } else {
    rms_norm_kernel<float><<<unsigned(runs), kNormThreads, 0, stream>>>(x, weight, group, eps, y);
  }
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
