#pragma once
// The CUDA backend: every Backend operation as device kernels, linear weights kept in their
// checkpoint format (dequantized inside the kernels).
#include <memory>

#include "backend/backend.h"

namespace tetra {

struct CudaNumerics {
  // The target numerics: linear layers see their activations as bf16 (f32 accumulation), except
  // the router and the head, which stay f32. false: every op in f32, for exact comparisons.
  bool bf16_linear_inputs = true;
  // The tensor-core attention on warpgroup MMA where the device has it (sm_90); false: on
  // mma.sync, as on every other GPU (the two may round differently; tests run both on a Hopper).
  bool warpgroup_mma_attention = true;
};

// Throws a runtime Error saying why when no usable CUDA device is present.
std::unique_ptr<Backend> make_cuda_backend(CudaNumerics numerics = {});

}  // namespace tetra
