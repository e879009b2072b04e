#include "backend/cuda/dequant_gemm.h"

#include <algorithm>
#include <cstddef>

#include "backend/cuda/pool_buffer.h"

namespace tetra::cuda {

DequantGemm::DequantGemm(cudaStream_t stream) : stream_(stream), cublas_(stream) {}

void* DequantGemm::scratch(size_t bytes) {
  if (bytes > scratch_.bytes()) {
    TETRA_CUDA_CHECK(cudaStreamSynchronize(stream_));  // GEMMs in flight may still read the old tile
    scratch_ = DeviceBuffer(bytes);
  }
  return scratch_.get();
}

void DequantGemm::gemm(int64_t m, int64_t n, int64_t k, float alpha, const void* w, const void* b, int64_t ldb,
                       OperandType type, float* c, int64_t ldc, float beta) {
  // Column-major view of the row-major y = x·wᵀ: C[m, n] = W[k, m]ᵀ · X[k, n].
  const cudaDataType_t dt = type == OperandType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
  // Pedantic f32: never TF32, whatever NVIDIA_TF32_OVERRIDE says (exact mode must stay f32).
  const cublasComputeType_t compute = type == OperandType::bf16 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_PEDANTIC;
  TETRA_CUBLAS_CHECK(cublasGemmEx(cublas_.get(), CUBLAS_OP_T, CUBLAS_OP_N, int(m), int(n), int(k), &alpha, w, dt, int(k),
                                  b, dt, int(ldb), &beta, c, CUDA_R_32F, int(ldc), compute, CUBLAS_GEMM_DEFAULT));
}

void DequantGemm::linear(const WeightRef& w, float alpha, const float* x, int64_t n, int64_t groups, bool round_input,
                         float* y, const void* rounded) {
  if (n == 0 || w.out == 0) return;
  const int64_t width = groups * w.in, per_group = w.out / groups;
  if (!round_input && w.format == WeightFormat::dense && w.weight_dtype == DType::bf16 && (n * width) % 4 == 0 &&
      reinterpret_cast<uintptr_t>(x) % 16 == 0) {
    exact_on_tensor_cores(w, alpha, x, n, groups, y);
    return;
  }
  const OperandType type = round_input ? OperandType::bf16 : OperandType::f32;
  const size_t bytes = operand_bytes(type);
  PoolBuffer own_rounding;
  const void* b = x;
  if (round_input && rounded) {
    b = rounded;
  } else if (round_input) {
    own_rounding = PoolBuffer(size_t(n * width) * bytes, stream_);
    round_to_bf16(x, n * width, own_rounding.get(), stream_);
    b = own_rounding.get();
  }
  // A dense weight already of the operand type is read in place; any other is dequantized.
  const bool in_place = w.format == WeightFormat::dense && w.weight_dtype == (round_input ? DType::bf16 : DType::f32);
  const int64_t tile_rows = in_place ? per_group : std::clamp<int64_t>(kTileElements / std::max<int64_t>(w.in, 1), 1, per_group);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t r = 0; r < per_group; r += tile_rows) {
      const int64_t rows = std::min(tile_rows, per_group - r), row0 = g * per_group + r;
      const void* tile = static_cast<const std::byte*>(w.weight) + size_t(row0 * w.in) * bytes;
      if (!in_place) {
        void* t = scratch(size_t(rows * w.in) * bytes);
        dequantize_rows(w, row0, rows, type, t, stream_);
        tile = t;
      }
      gemm(rows, n, w.in, alpha, tile, static_cast<const std::byte*>(b) + size_t(g * w.in) * bytes, width, type, y + row0,
           w.out);
    }
}

void DequantGemm::exact_on_tensor_cores(const WeightRef& w, float alpha, const float* x, int64_t n, int64_t groups,
                                        float* y) {
  const int64_t width = groups * w.in, per_group = w.out / groups, count = n * width;
  PoolBuffer parts(size_t(3 * count) * operand_bytes(OperandType::bf16), stream_);
  split_to_bf16x3(x, count, parts.get(), stream_);
  for (int64_t g = 0; g < groups; ++g) {
    const void* tile = static_cast<const std::byte*>(w.weight) + size_t(g * per_group * w.in) * 2;
    // the smallest part first: each later sum rounds once, relative to a larger total
    for (int p = 2; p >= 0; --p)
      gemm(per_group, n, w.in, alpha, tile, static_cast<const std::byte*>(parts.get()) + size_t(p * count + g * w.in) * 2,
           width, OperandType::bf16, y + g * per_group, w.out, p == 2 ? 0.0f : 1.0f);
  }
}

void DequantGemm::multiply(std::initializer_list<WeightRef> ws, float alpha, const void* a, OperandType type, int64_t rows,
                           float* c, int64_t ldc) {
  if (rows == 0 || ws.size() == 0) return;
  const size_t bytes = operand_bytes(type);
  const int64_t k = ws.begin()->in;
  int64_t m = 0;
  for (const WeightRef& w : ws) {
    if (w.in != k) runtime_error("cuda grouped GEMM: stacked weights differ in width (", w.in, " vs ", k, ")");
    m += w.out;
  }
  auto* tile = static_cast<std::byte*>(scratch(size_t(m * k) * bytes));
  int64_t row = 0;
  for (const WeightRef& w : ws) {
    dequantize_rows(w, 0, w.out, type, tile + size_t(row * k) * bytes, stream_);
    row += w.out;
  }
  gemm(m, rows, k, alpha, tile, a, k, type, c, ldc);
}

}  // namespace tetra::cuda
