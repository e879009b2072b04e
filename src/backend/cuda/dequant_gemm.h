#pragma once
// The tensor-core path for many rows (prefill): cuBLAS GEMMs over weights that stay in their
// checkpoint format. Each call dequantizes the weight a tile of rows at a time into a scratch
// buffer owned here (grown to the largest tile seen, never a copy of the model), then multiplies
// with cuBLAS: bf16 × bf16 with f32 accumulation and f32 output. A layer whose input is not
// rounded to bf16 (exact mode, router, head) gets f32 products: against bf16 weights the input
// splits into three bf16 parts that sum to it exactly (three bf16 GEMMs into one f32 sum, on the
// tensor cores), other weights dequantize to f32 for an f32 GEMM.
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "backend/cuda/cublas_handle.h"
#include "backend/cuda/gemm_operands.h"

namespace tetra::cuda {

class DequantGemm {
 public:
  // Weight elements per dequantized tile: 16M (32 MB of bf16, which the GEMM reads back while
  // much of it is still in the 50 MB L2).
  static constexpr int64_t kTileElements = int64_t(16) << 20;

  explicit DequantGemm(cudaStream_t stream);

  cudaStream_t stream() const { return stream_; }

  // y[n, w.out] = alpha · x·wᵀ (x f32 [n, groups·w.in]); groups > 1 is the o_groups
  // block-diagonal form of cuda::linear. alpha is the per-tensor factor (nvfp4
  // weight_scale_2, the fp8_tensor scalar) that the dequantized tile leaves out.
  // `rounded`: x already rounded to bf16 (linears sharing an input round it once), or null.
  void linear(const WeightRef& w, float alpha, const float* x, int64_t n, int64_t groups, bool round_input, float* y,
              const void* rounded = nullptr);

  // c[rows, Σ out] (row pitch ldc, f32) = alpha · a·[ws stacked by rows]ᵀ, a [rows, in] of `type`
  // (every weight has the same width): the per-expert GEMMs of the grouped MoE.
  void multiply(std::initializer_list<WeightRef> ws, float alpha, const void* a, OperandType type, int64_t rows,
                float* c, int64_t ldc);

 private:
  void* scratch(size_t bytes);
  // linear() of an f32 input against a bf16 weight, read in place
  void exact_on_tensor_cores(const WeightRef& w, float alpha, const float* x, int64_t n, int64_t groups, float* y);
  // c[n, m] (pitch ldc) = alpha · b[n, k] (pitch ldb) · w[m, k]ᵀ + beta · c
  void gemm(int64_t m, int64_t n, int64_t k, float alpha, const void* w, const void* b, int64_t ldb, OperandType type,
            float* c, int64_t ldc, float beta = 0.0f);

  cudaStream_t stream_;
  CublasHandle cublas_;
  DeviceBuffer scratch_;
};

}  // namespace tetra::cuda
