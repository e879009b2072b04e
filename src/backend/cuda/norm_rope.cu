#include "backend/cuda/norm_rope.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/rope.cuh"

namespace tetra::cuda {
namespace {

constexpr int kNormThreads = 512;

// What the norm kernels apply after the norm when Rope is set: rope on the run's last 2·half values,
// the run being head (run % heads) of row (run / heads).
struct RopeArgs {
  const int32_t* positions = nullptr;
  const float* inv_freq = nullptr;
  int64_t heads = 1, half = 0;
};

// Runs of up to kWarpRunMax values take a warp each, 4 warps to a block, the run held in
// registers between the sum and the scaling (a 512-thread block per 512-value run left three
// quarters of its threads idle and synchronized twice: 1.6 ms for V4-Flash's per-head query norm
// over 8192 rows); longer runs take a block each. Rows whose length is a multiple of 4 (and
// 16-byte aligned) are read as float4. Each thread adds its values in order, then the warp
// (block) sum: the kernel depends on the run length only, so a run's result does not depend on
// how many runs share the launch.
constexpr int64_t kWarpRunMax = 1024;
constexpr int kWarpRunsPerBlock = 4;

// Rope's frequencies for the two pairs of vector i (4 values; zeros before the roped part). They
// are the model's: the warp kernel reads them before waiting on the kernel ahead.
__device__ __forceinline__ float2 rope_freqs(const RopeArgs& rope, int64_t group, int i) {
  const int64_t first = group - 2 * rope.half, k = 4 * int64_t(i);  // k: the vector's first value
  return k >= first ? make_float2(rope.inv_freq[(k - first) / 2], rope.inv_freq[(k + 2 - first) / 2]) : float2{};
}

// Vector i of a run: scaled by r and its weights w, then roped with frequencies freq at the run's
// position when Rope is set.
template <typename Vec, bool Rope>
__device__ __forceinline__ void scale_and_store(Vec a, Vec w, float2 freq, float position, int i, int64_t group,
                                                float r, const RopeArgs& rope, Vec* out) {
  constexpr int kLanes = sizeof(Vec) / sizeof(float);
  static_assert(!Rope || kLanes == 4, "rope needs whole pairs in a vector");
  float* e = reinterpret_cast<float*>(&a);
  const float* we = reinterpret_cast<const float*>(&w);
#pragma unroll
  for (int l = 0; l < kLanes; ++l) e[l] = e[l] * r * we[l];
  if constexpr (Rope) {
    if (int64_t(kLanes) * i >= group - 2 * rope.half) {
      rotate_pair(e[0], e[1], freq.x * position, false);
      rotate_pair(e[2], e[3], freq.y * position, false);
    }
  }
  out[i] = a;
}

// Vector i of the norm's weight, ones without one (x·1 is x: the same values either way).
template <typename Vec>
__device__ __forceinline__ Vec weight_vector(const float* weight, int i) {
  if (weight) return reinterpret_cast<const Vec*>(weight)[i];
  Vec ones;
  float* e = reinterpret_cast<float*>(&ones);
#pragma unroll
  for (int l = 0; l < int(sizeof(Vec) / sizeof(float)); ++l) e[l] = 1.0f;
  return ones;
}

// The tensors one warp-kernel launch normalizes, their runs one after another: part p's runs
// end before run end[p]; rope.heads is each part's own (its runs a row).
struct WarpRuns {
  const float* x[kMaxNormParts];
  const float* weight[kMaxNormParts];
  float* y[kMaxNormParts];
  int64_t heads[kMaxNormParts];
  int64_t end[kMaxNormParts];
  int parts = 0;
};

// Early: the weights and rope frequencies (the model's, immutable) are read before waiting on the
// kernel ahead, so that only x's round trip is left after the wait. On the H200 that made batch-1
// decode 2.5% faster and, taken for every launch, batch 32 2.4% slower (twenty-third run of
// docs/perf.md; why was not found), so only launches of one row per part take it. Both instances
// compute the same values in the same order: a row's result does not depend on its batch.
template <typename Vec, bool Rope, bool Early>
__global__ void __launch_bounds__(kWarpRunsPerBlock * 32)
    rms_norm_warp_kernel(WarpRuns runs, int64_t group, float eps, RopeArgs rope) {
  if constexpr (!Early) {
    wait_for_inputs();
    allow_next_kernel();
  }
  constexpr int kLanes = sizeof(Vec) / sizeof(float), kPerLane = int(kWarpRunMax) / 32 / kLanes;
  int64_t run = int64_t(blockIdx.x) * kWarpRunsPerBlock + threadIdx.x / 32;
  // the part by constant indices (an indexed kernel parameter is copied to local memory first)
  static_assert(kMaxNormParts == 2, "a run's part is the first or the second");
  if (run >= (runs.parts > 1 ? runs.end[1] : runs.end[0])) return;
  const bool second = run >= runs.end[0];
  if (second) run -= runs.end[0];
  const float* x = second ? runs.x[1] : runs.x[0];
  const float* weight = second ? runs.weight[1] : runs.weight[0];
  float* y = second ? runs.y[1] : runs.y[0];
  rope.heads = second ? runs.heads[1] : runs.heads[0];
  const int lane = int(threadIdx.x & 31), vecs = int(group / kLanes);
  Vec w[kPerLane];
  float2 freq[kPerLane] = {};
  float position = 0;
  if constexpr (Early) {
#pragma unroll
    for (int j = 0; j < kPerLane; ++j)
      if (lane + 32 * j < vecs) w[j] = weight_vector<Vec>(weight, lane + 32 * j);
    if constexpr (Rope)
#pragma unroll
      for (int j = 0; j < kPerLane; ++j)
        if (lane + 32 * j < vecs) freq[j] = rope_freqs(rope, group, lane + 32 * j);
    wait_for_inputs();
    allow_next_kernel();
    if constexpr (Rope) position = float(rope.positions[run / rope.heads]);
  }
  const Vec* v = reinterpret_cast<const Vec*>(x + run * group);
  Vec a[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j)
    if (lane + 32 * j < vecs) a[j] = v[lane + 32 * j];
  float s = 0;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j)
    if (lane + 32 * j < vecs) {
      const float* e = reinterpret_cast<const float*>(&a[j]);
#pragma unroll
      for (int l = 0; l < kLanes; ++l) s = fmaf(e[l], e[l], s);
    }
  const float r = 1.0f / sqrtf(warp_sum(s) / float(group) + eps);
#pragma unroll
  for (int j = 0; j < kPerLane; ++j)
    if (const int i = lane + 32 * j; i < vecs) {
      if constexpr (!Early) {  // each read where it is used, only for the roped vectors
        w[j] = weight_vector<Vec>(weight, i);
        if (Rope && int64_t(kLanes) * i >= group - 2 * rope.half) {
          freq[j] = rope_freqs(rope, group, i);
          position = float(rope.positions[run / rope.heads]);
        }
      }
      scale_and_store<Vec, Rope>(a[j], w[j], freq[j], position, i, group, r, rope, reinterpret_cast<Vec*>(y + run * group));
    }
}

// One block per run; a thread's loads are unrolled so that they are in flight together.
template <typename Vec, bool Rope>
__global__ void __launch_bounds__(kNormThreads)
    rms_norm_block_kernel(const float* x, const float* weight, int64_t group, float eps, RopeArgs rope, float* y) {
  wait_for_inputs();
  allow_next_kernel();
  constexpr int kLanes = sizeof(Vec) / sizeof(float);
  const int64_t run = blockIdx.x;
  const int vecs = int(group / kLanes);
  const Vec* v = reinterpret_cast<const Vec*>(x + run * group);
  float s = 0;
#pragma unroll 4
  for (int i = threadIdx.x; i < vecs; i += kNormThreads) {
    const Vec a = v[i];
    const float* e = reinterpret_cast<const float*>(&a);
#pragma unroll
    for (int l = 0; l < kLanes; ++l) s = fmaf(e[l], e[l], s);
  }
  const float r = 1.0f / sqrtf(block_sum(s) / float(group) + eps);
  const float position = Rope ? float(rope.positions[run / rope.heads]) : 0.0f;
#pragma unroll 4
  for (int i = threadIdx.x; i < vecs; i += kNormThreads)
    scale_and_store<Vec, Rope>(v[i], weight_vector<Vec>(weight, i), Rope ? rope_freqs(rope, group, i) : float2{},
                               position, i, group, r, rope, reinterpret_cast<Vec*>(y + run * group));
}

// Runs of up to kWarpRunMax values of every part in one launch of the warp kernel.
template <typename Vec, bool Rope>
void launch_warp_runs(const WarpRuns& runs, int64_t group, float eps, const RopeArgs& rope, cudaStream_t stream) {
  const int64_t total = runs.end[runs.parts - 1];
  bool one_row = true;  // every part's runs are one row's heads
  for (int p = 0; p < runs.parts; ++p) one_row &= runs.end[p] - (p ? runs.end[p - 1] : 0) == runs.heads[p];
  const dim3 grid(unsigned((total + kWarpRunsPerBlock - 1) / kWarpRunsPerBlock)), block(kWarpRunsPerBlock * 32);
  if (one_row)
    launch_early(rms_norm_warp_kernel<Vec, Rope, true>, grid, block, 0, stream, runs, group, eps, rope);
  else
    launch_early(rms_norm_warp_kernel<Vec, Rope, false>, grid, block, 0, stream, runs, group, eps, rope);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

template <typename Vec, bool Rope>
void launch_rms_norm(const float* x, const float* weight, int64_t runs, int64_t group, float eps, const RopeArgs& rope,
                     float* y, cudaStream_t stream) {
  if (group <= kWarpRunMax) {
    WarpRuns one;
    one.x[0] = x, one.weight[0] = weight, one.y[0] = y, one.heads[0] = rope.heads, one.end[0] = runs, one.parts = 1;
    return launch_warp_runs<Vec, Rope>(one, group, eps, rope, stream);
  }
  launch_early(rms_norm_block_kernel<Vec, Rope>, dim3(unsigned(runs)), dim3(kNormThreads), 0, stream, x, weight, group,
               eps, rope, y);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

__global__ void rope_kernel(float* x, const int32_t* positions, const float* inv_freq, int64_t rows, int64_t heads,
                            int64_t head_dim, int64_t half, bool inverse) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= rows * heads * half) return;
  const int64_t i = k % half, h = (k / half) % heads, r = k / (half * heads);
  float* p = x + (r * heads + h) * head_dim + head_dim - 2 * half + 2 * i;
  float a = p[0], b = p[1];
  rotate_pair(a, b, inv_freq[i] * float(positions[r]), inverse);  // f32 angle, as the reference computes it
  p[0] = a;
  p[1] = b;
}

}  // namespace

void rms_norm(const float* x, const float* weight, int64_t runs, int64_t group, float eps, float* y, cudaStream_t stream) {
  if (runs == 0) return;
  if (group % 4 == 0 && aligned16(x) && aligned16(y) && (!weight || aligned16(weight)))
    launch_rms_norm<float4, false>(x, weight, runs, group, eps, {}, y, stream);
  else
    launch_rms_norm<float, false>(x, weight, runs, group, eps, {}, y, stream);
}

// The fused kernel's shapes: whole float4 vectors, and the rotated pairs starting at one.
bool fused_norm_rope_fits(const float* x, const float* weight, const float* y, int64_t head_dim, int64_t half) {
  return head_dim % 4 == 0 && 2 * half <= head_dim && (head_dim - 2 * half) % 4 == 0 && aligned16(x) && aligned16(y) &&
         (!weight || aligned16(weight));
}

bool rms_norm_rope(const float* x, const float* weight, int64_t rows, int64_t heads, int64_t head_dim, float eps,
                   const int32_t* positions, const float* inv_freq, int64_t half, float* y, cudaStream_t stream) {
  if (!fused_norm_rope_fits(x, weight, y, head_dim, half)) return false;
  if (rows * heads == 0) return true;
  launch_rms_norm<float4, true>(x, weight, rows * heads, head_dim, eps, RopeArgs{positions, inv_freq, heads, half}, y,
                                stream);
  return true;
}

bool rms_norm_ropes(const NormRopePart* parts, int count, int64_t rows, int64_t head_dim, float eps,
                    const int32_t* positions, const float* inv_freq, int64_t half, cudaStream_t stream) {
  if (count < 1 || count > kMaxNormParts || head_dim > kWarpRunMax) return false;
  WarpRuns runs;
  int64_t end = 0;
  for (int p = 0; p < count; ++p) {
    const NormRopePart& a = parts[p];
    if (!fused_norm_rope_fits(a.x, a.weight, a.y, head_dim, half)) return false;
    runs.x[p] = a.x, runs.weight[p] = a.weight, runs.y[p] = a.y, runs.heads[p] = a.heads;
    runs.end[p] = end += rows * a.heads;
  }
  runs.parts = count;
  if (end == 0) return true;
  launch_warp_runs<float4, true>(runs, head_dim, eps, RopeArgs{positions, inv_freq, 1, half}, stream);
  return true;
}

void rope(float* x, const int32_t* positions, const float* inv_freq, int64_t rows, int64_t heads, int64_t head_dim,
          int64_t half, bool inverse, cudaStream_t stream) {
  const int64_t n = rows * heads * half;
  if (n == 0) return;
  launch_early(rope_kernel, dim3(unsigned((n + 255) / 256)), dim3(256), 0, stream, x, positions, inv_freq, rows, heads,
               head_dim, half, inverse);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
