#pragma once
// Routed experts for many tokens (prefill): the (token, slot) pairs grouped by expert on the
// device (a stable radix sort by expert, exact offsets from the sorted keys), one tensor-core
// GEMM per used expert for w1 and w3 stacked, one pass for the clamped SwiGLU, one GEMM per
// expert for w2, then the per-token combine in slot order (deterministic: no atomics).
// One host synchronization per call: cuBLAS takes each expert's row count from the host, so
// the E+1 offsets are copied back after the sort. Decode-size batches use moe.h instead.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/dequant_gemm.h"

namespace tetra::cuda {

struct GroupedExperts {
  int64_t experts = 0, dim = 0, inter = 0;
  const WeightRef* w1 = nullptr;  // host arrays, one per expert
  const WeightRef* w2 = nullptr;
  const WeightRef* w3 = nullptr;
  const float* w2_alpha = nullptr;   // host [experts]: w2's per-tensor factor
  const float* up_alpha = nullptr;   // device [experts, 2]: w1's and w3's per-tensor factors
};

// out [n, dim] = Σ_j weights[t, j] · w2_e(swiglu(w1_e·x_t, w3_e·x_t)), e = selected[t, j]; all
// pointers but the GroupedExperts host arrays are device memory.
void grouped_experts(DequantGemm& gemm, const GroupedExperts& e, const float* x, int64_t n, const float* weights,
                     const int32_t* selected, int64_t k, float limit, bool round_input, float* out);

}  // namespace tetra::cuda
