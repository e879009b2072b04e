#pragma once
// Linear layers on weights kept in their checkpoint format, dequantized inside the kernel.
#include <cuda_runtime.h>

#include "backend/cuda/weight_ref.h"

namespace tetra::cuda {

// y[n, w.out] = x·wᵀ with f32 accumulation. groups > 1: the o_groups block-diagonal form, x is
// [n, groups·w.in] and output row o reads input group o / (w.out / groups). bf16 and quantized
// weights run on the tensor cores (mma_rows.cuh), 64 tokens per pass; split_k: warps that share
// a row tile's inputs (1..8; 0 picks by shape, and may also split a short matrix's rows over a
// cluster of blocks; for benchmarks).
void linear(const WeightRef& w, const float* x, int64_t n, int64_t groups, bool round_input_to_bf16, float* y,
            cudaStream_t stream, int split_k = 0);

// How linear() runs on the tensor cores for n tokens (tests, benchmarks): its grid's blocks, the
// warps of a block, and how many such blocks a multiprocessor holds at once (registers, shared
// memory). All zero where the tensor-core kernels do not take the weight.
struct LinearGrid {
  int64_t blocks = 0;
  int warps = 0, blocks_per_sm = 0;
};
LinearGrid linear_grid(const WeightRef& w, int64_t n, int64_t groups, bool round_input_to_bf16);

// y[i][n, w[i].out] = x·w[i]ᵀ for count (1..kMaxLinearsPerLaunch) matrices of one format and input width in one
// launch (their row tiles in one grid, split as one matrix of all their rows: the sums' order
// depends on the set, never on the tokens). Returns false, launching nothing, where the
// tensor-core kernels do not take them together: the caller then runs linear() on each.
constexpr int kMaxLinearsPerLaunch = 8;
bool linears(const WeightRef* w, float* const* y, int count, const float* x, int64_t n, bool round_input_to_bf16,
             cudaStream_t stream);

// y[n, w1.out] = swiglu(x·w1ᵀ, x·w3ᵀ), the gate clamped above at limit and the up value to ±limit
// (limit <= 0: no clamp), in one launch; equal bit for bit to two linear() calls and swiglu.
// Returns false, launching nothing, where the tensor-core kernels do not take the weights (or
// w1 and w3 differ in layout): the caller then runs the three ops.
bool gated_linear(const WeightRef& w1, const WeightRef& w3, const float* x, int64_t n, bool round_input_to_bf16,
                  float limit, float* y, cudaStream_t stream);

}  // namespace tetra::cuda
