#pragma once
// Routed experts for many tokens (prefill): the (token, slot) pairs grouped by expert on the
// device (a stable radix sort by expert, exact offsets from the sorted keys, no capacity), the
// experts' GEMMs over each expert's rows, then the per-token combine in slot order
// (deterministic: no atomics). With bf16 activations and a layout the fused kernels take
// (expert_gemm.h) the GEMMs run there: weights decoded in registers, SwiGLU in the up GEMM's
// epilogue, no host synchronization. Otherwise (f32 activations, other layouts) each used
// expert's weights are dequantized into a tile for cuBLAS, one GEMM per expert for w1 and w3
// stacked, one SwiGLU pass, one GEMM per expert for w2; cuBLAS takes each expert's row count
// from the host, so that path copies the E+1 offsets back after the sort (one host
// synchronization per call). Decode-size batches use moe.h instead.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/dequant_gemm.h"
#include "backend/cuda/moe.h"

namespace tetra::cuda {

struct GroupedExperts {
  int64_t experts = 0, dim = 0, inter = 0;
  const WeightRef* w1 = nullptr;  // host arrays, one per expert
  const WeightRef* w2 = nullptr;
  const WeightRef* w3 = nullptr;
  const WeightRef* device_w1 = nullptr;  // the same tables on the device (fused kernels)
  const WeightRef* device_w2 = nullptr;
  const WeightRef* device_w3 = nullptr;
  ExpertLayout layout;
  const float* w2_alpha = nullptr;   // host [experts]: w2's per-tensor factor
  const float* up_alpha = nullptr;   // device [experts, 2]: w1's and w3's per-tensor factors
  // Expert parallelism: device [experts], e where this rank holds expert e, `experts` where
  // another rank does (its tables are null); null when every expert is held here.
  const int32_t* expert_key = nullptr;
};

// out [n, dim] = Σ_j weights[t, j] · w2_e(swiglu(w1_e·x_t, w3_e·x_t)), e = selected[t, j]; all
// pointers but the GroupedExperts host arrays are device memory.
void grouped_experts(DequantGemm& gemm, const GroupedExperts& e, const float* x, int64_t n, const float* weights,
                     const int32_t* selected, int64_t k, float limit, bool round_input, float* out);
// The same in two halves (expert parallelism): each pair's expert output into slots [n·k, dim]
// (row t·k + j; zeros for experts held elsewhere), which combine_expert_slots (moe.h) then adds
// as grouped_experts does, bit for bit.
void grouped_expert_slots(DequantGemm& gemm, const GroupedExperts& e, const float* x, int64_t n, const int32_t* selected,
                          int64_t k, float limit, bool round_input, float* slots);

}  // namespace tetra::cuda
