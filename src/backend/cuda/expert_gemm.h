#pragma once
// The routed experts' GEMMs for many tokens with the weights in their checkpoint format (W4A16 /
// W8A16 / bf16): the expert-sorted (token, slot) rows in tiles of 64 rows of one expert, each
// tile against a block of weight rows per CTA, on the tensor cores (mma.sync m16n8k16, bf16 in,
// f32 accumulate). Weight codes and scales stream through shared memory (cp.async, multi-stage)
// and become exact bf16 pairs in registers (bf16_codes.cuh), each decoded once per tile; the
// activations are bf16, stored in the k order that the decoder produces. Up: w1 and w3 rows of
// the same outputs side by side, the clamped SwiGLU in the epilogue, h written in bf16. Down:
// w2, f32 rows. No host synchronization: the tiles come from the device-side offsets. Every
// output sums its k in one fixed order, whatever shares its tile (batch invariant).
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/moe.h"
#include "backend/cuda/weight_ref.h"

namespace tetra::cuda {

// Whether the fused kernels take these experts: every expert's w1, w3 and w2 of one layout
// (uniform) in one format among bf16, FP8 (128×128 blocks with f32 or ue8m0 scales, per-tensor),
// MXFP4 with ue8m0 scales and NVFP4; dim and inter multiples of 128; the weights 16-byte aligned
// and the scales aligned to their per-stage copies (host: the per-expert tables).
bool expert_gemm_supported(const ExpertLayout& layout, int64_t experts, const WeightRef* w1, const WeightRef* w2,
                           const WeightRef* w3, const float* x);

struct ExpertGemmArgs {
  int64_t experts = 0, dim = 0, inter = 0;
  WeightFormat format = WeightFormat::dense;
  const WeightRef* w1 = nullptr;  // device tables, one per expert
  const WeightRef* w2 = nullptr;
  const WeightRef* w3 = nullptr;
};

// y[i] = w2_e(swiglu(w1_e·x_t, w3_e·x_t)) (f32 [pairs, dim]) for sorted row i of expert e and
// token t = order[i] / k; offsets [experts + 1]: each expert's first sorted row (device).
void expert_gemms(const ExpertGemmArgs& a, const float* x, int64_t n, int64_t k, const int32_t* order,
                  const int32_t* offsets, float limit, float* y, cudaStream_t stream);

}  // namespace tetra::cuda
