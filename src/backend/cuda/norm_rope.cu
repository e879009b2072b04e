#include "backend/cuda/norm_rope.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/launch.cuh"

namespace tetra::cuda {
namespace {

constexpr int kNormThreads = 512;

// WarpRuns: one warp per run, for runs of up to kWarpRunMax values (a 512-thread block per 512-value
// run left three quarters of its threads idle and synchronized twice: 1.6 ms for V4-Flash's
// per-head query norm over 8192 rows); otherwise one block per run. Rows whose length is a
// multiple of 4 (and 16-byte aligned) are read as float4; a thread's loads are unrolled so that
// they are in flight together. Each thread adds its values in order, then the warp (block) sum:
// the kernel depends on the run length only, so a run's result does not depend on how many runs
// share the launch.
constexpr int64_t kWarpRunMax = 1024;

template <typename Vec, bool WarpRuns>
__global__ void __launch_bounds__(kNormThreads)
    rms_norm_kernel(const float* x, const float* weight, int64_t runs, int64_t group, float eps, float* y) {
  allow_next_kernel();
  constexpr int kLanes = sizeof(Vec) / sizeof(float), kStride = WarpRuns ? 32 : kNormThreads;
  const int64_t run = WarpRuns ? int64_t(blockIdx.x) * (kNormThreads / 32) + threadIdx.x / 32 : int64_t(blockIdx.x);
  if constexpr (WarpRuns)
    if (run >= runs) return;
  const int first = WarpRuns ? int(threadIdx.x & 31) : int(threadIdx.x), vecs = int(group / kLanes);
  const Vec* v = reinterpret_cast<const Vec*>(x + run * group);
  Vec* out = reinterpret_cast<Vec*>(y + run * group);
  float s = 0;
#pragma unroll 4
  for (int i = first; i < vecs; i += kStride) {
    const Vec a = v[i];
    const float* e = reinterpret_cast<const float*>(&a);
#pragma unroll
    for (int l = 0; l < kLanes; ++l) s = fmaf(e[l], e[l], s);
  }
  const float r = 1.0f / sqrtf((WarpRuns ? warp_sum(s) : block_sum(s)) / float(group) + eps);
#pragma unroll 4
  for (int i = first; i < vecs; i += kStride) {
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
  const auto blocks = unsigned(group <= kWarpRunMax ? (runs + kNormThreads / 32 - 1) / (kNormThreads / 32) : runs);
  auto launch = [&](auto kernel) { kernel<<<blocks, kNormThreads, 0, stream>>>(x, weight, runs, group, eps, y); };
  if (group <= kWarpRunMax && vec4) launch(rms_norm_kernel<float4, true>);
  else if (group <= kWarpRunMax) launch(rms_norm_kernel<float, true>);
  else if (vec4) launch(rms_norm_kernel<float4, false>);
  else launch(rms_norm_kernel<float, false>);
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
