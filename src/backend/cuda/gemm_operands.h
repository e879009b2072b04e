#pragma once
// Operands of the tensor-core GEMMs (the prefill path): weights dequantized from their
// checkpoint format into a bf16 (or f32) tile, activations rounded to bf16, and the token rows
// of an expert-sorted (token, slot) order gathered into one contiguous matrix.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/weight_ref.h"

namespace tetra::cuda {

enum class OperandType { bf16, f32 };

inline size_t operand_bytes(OperandType t) { return t == OperandType::bf16 ? 2 : 4; }

// Rows [row0, row0 + rows) of w as a row-major [rows, w.in] tile of exact values, leaving out
// the per-tensor factor (nvfp4 weight_scale_2, the fp8_tensor scalar), which the GEMM applies
// as alpha. In bf16 the fp4 and fp8 products with e8m0/e4m3/power-of-two scales are exact;
// f16/f32 weights and non-power-of-two f32 block scales round once to bf16.
void dequantize_rows(const WeightRef& w, int64_t row0, int64_t rows, OperandType type, void* tile, cudaStream_t stream);

// out[i] = bf16(x[i]) for i < count (round to nearest even, as the decode kernels see x).
void round_to_bf16(const float* x, int64_t count, void* out, cudaStream_t stream);

// out = three planes of `count` bf16 values whose sum is x exactly (count a multiple of 4, both
// 16-byte aligned): an f32 operand for bf16 tensor-core GEMMs, each product of a plane and a bf16
// weight exact in f32.
void split_to_bf16x3(const float* x, int64_t count, void* out, cudaStream_t stream);

// out row i = x row (order[i] / k) (width values), as `type`: the expert-sorted A operand.
void gather_expert_rows(const float* x, int64_t width, const int32_t* order, int64_t rows, int64_t k, OperandType type,
                 void* out, cudaStream_t stream);

}  // namespace tetra::cuda
