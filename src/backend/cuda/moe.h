#pragma once
// MoE on the device: router scores and top-k selection, then the routed experts for every
// (token, slot) pair, combined per token in slot order (deterministic: no atomics).
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/weight_ref.h"
#include "model/config.h"

namespace tetra::cuda {

struct RouteParams {
  int64_t experts = 0, k = 0;
  ScoringFunc scoring = ScoringFunc::sqrtsoftplus;
  bool renormalize = true;
  float route_scale = 1;
};

// logits [n, experts] → weights [n, k], selected [n, k]. tid2eid [vocab, k] (hash layers) or
// bias [experts] (may be null) decides the selection; ties go to the lower expert index.
void route(const float* logits, const float* bias, const int32_t* tid2eid, const int32_t* ids, int64_t n,
           const RouteParams& p, float* weights, int32_t* selected, cudaStream_t stream);

// Host copies of a layer's first expert's w1 and w2; uniform: every expert's w1 and w3 match
// `up`, and every w2 matches `down`, in format, dtypes and shape (the tensor-core kernels are
// chosen once for all experts of a launch); experts: the length of the device tables (the
// decode kernels group a step's pairs by expert when it is known, up to 1024).
struct ExpertLayout {
  WeightRef up, down;
  bool uniform = false;
  int64_t experts = 0;
  // Some experts' tables are null (expert parallelism: another rank holds them); their pairs
  // come out zero. expert_key (device [experts]): e for an expert held here, `experts` for
  // another rank's (null when every expert is held).
  bool some_absent = false;
  const int32_t* expert_key = nullptr;
};
bool same_layout(const WeightRef& a, const WeightRef& b);

// experts_w1/w2/w3: device arrays of one WeightRef per expert. scratch:
// routed_experts_scratch_floats(n, k, dim, inter) floats, 16-byte aligned. out [n, dim] =
// Σ_j weights[t, j] · w2_e(swiglu(w1_e·x, w3_e·x)). split: warps per block of the tensor-core
// kernels, 1..16 (0: chosen from the matrices and k; a benchmark sweeps it).
int64_t routed_experts_scratch_floats(int64_t n, int64_t k, int64_t dim, int64_t inter);
void routed_experts(const float* x, int64_t n, int64_t dim, int64_t inter, const float* weights, const int32_t* selected,
                    int64_t k, const WeightRef* experts_w1, const WeightRef* experts_w2, const WeightRef* experts_w3,
                    const ExpertLayout& layout, float limit, bool round_input_to_bf16, float* scratch, float* out,
                    cudaStream_t stream, int split = 0);
// routed_experts in two halves (expert parallelism): each pair's expert output into slots
// [n·k, dim] (row t·k + j; zeros where the expert's table is null), then out [n, dim] = Σ_j
// weights[t, j]·slots[t·k + j] in slot order: routed_experts' result, bit for bit.
void routed_expert_slots(const float* x, int64_t n, int64_t dim, int64_t inter, const int32_t* selected, int64_t k,
                         const WeightRef* experts_w1, const WeightRef* experts_w2, const WeightRef* experts_w3,
                         const ExpertLayout& layout, float limit, bool round_input_to_bf16, float* scratch,
                         float* slots, cudaStream_t stream);
void combine_expert_slots(const float* slots, const float* weights, int64_t n, int64_t k, int64_t dim, float* out,
                          cudaStream_t stream);

}  // namespace tetra::cuda
