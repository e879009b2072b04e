#include "backend/cuda/linear.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/row_dot.cuh"

namespace tetra::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

// grid: (rows of a group / kWarpsPerBlock, tokens / Tokens, groups); one warp per output row,
// every warp of a block in the same group (they share the staged input).
template <int Tokens>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    linear_kernel(WeightRef w, const float* x, int64_t n, int64_t out_per_group, int64_t x_stride, bool round_input,
                  float* y) {
  __shared__ __align__(16) float tile[Tokens * kTilePitch];
  const int64_t group = blockIdx.z;
  const int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;  // row within the group
  const int64_t o = group * out_per_group + r;
  const int64_t t0 = int64_t(blockIdx.y) * Tokens;
  const int tokens = int(min(int64_t(Tokens), n - t0));
  float acc[Tokens] = {};
  block_row_dot<Tokens>(w, o, r < out_per_group, x + t0 * x_stride + group * w.in, x_stride, tokens, round_input, tile,
                        acc);
  if (r >= out_per_group) return;
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
  const int64_t per_group = w.out / groups;
  const unsigned row_blocks = unsigned((per_group + kWarpsPerBlock - 1) / kWarpsPerBlock);
  if (n == 1)  // decode of one sequence: a one-accumulator instance, fewer registers
    linear_kernel<1><<<dim3(row_blocks, 1, unsigned(groups)), kWarpsPerBlock * 32, 0, stream>>>(
        w, x, n, per_group, groups * w.in, round_input_to_bf16, y);
  else
    linear_kernel<kRowTokens><<<dim3(row_blocks, unsigned((n + kRowTokens - 1) / kRowTokens), unsigned(groups)),
                                kWarpsPerBlock * 32, 0, stream>>>(w, x, n, per_group, groups * w.in,
                                                                  round_input_to_bf16, y);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
