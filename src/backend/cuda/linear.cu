#include "backend/cuda/linear.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/warp_linear.cuh"

namespace tetra::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

// grid: (output rows / kWarpsPerBlock, tokens / Tokens); one warp per output row.
template <int Tokens>
__global__ void linear_kernel(WeightRef w, const float* x, int64_t n, int64_t out_per_group, int64_t x_stride,
                              bool round_input, float* y) {
  const int64_t o = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (o >= w.out) return;
  const int64_t t0 = int64_t(blockIdx.y) * Tokens;
  const int tokens = int(min(int64_t(Tokens), n - t0));
  float acc[Tokens] = {};
  warp_row_dot(w, o, x + t0 * x_stride + (o / out_per_group) * w.in, x_stride, tokens, round_input, acc);
#pragma unroll
  for (int t = 0; t < Tokens; ++t) {
    const float s = warp_sum(acc[t]);
    if (t < tokens && (threadIdx.x & 31) == 0) y[(t0 + t) * w.out + o] = s;
  }
}

}  // namespace

void linear(const WeightRef& w, const float* x, int64_t n, int64_t groups, bool round_input_to_bf16, float* y,
            cudaStream_t stream) {
  if (n == 0 || w.out == 0) return;
  const unsigned row_blocks = unsigned((w.out + kWarpsPerBlock - 1) / kWarpsPerBlock);
  if (n == 1)
    linear_kernel<1><<<dim3(row_blocks, 1), kWarpsPerBlock * 32, 0, stream>>>(w, x, n, w.out / groups, groups * w.in,
                                                                              round_input_to_bf16, y);
  else
    linear_kernel<kRowTokens><<<dim3(row_blocks, unsigned((n + kRowTokens - 1) / kRowTokens)), kWarpsPerBlock * 32, 0,
                                stream>>>(w, x, n, w.out / groups, groups * w.in, round_input_to_bf16, y);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
