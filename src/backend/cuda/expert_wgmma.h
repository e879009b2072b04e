#pragma once
// The routed experts' GEMMs for many tokens on Hopper's warpgroup MMA (sm_90a), FP4 weights
// (MXFP4, NVFP4): tiles of 128 expert-sorted rows, the activations streamed through a ring of
// shared memory (cp.async, 128-byte swizzle) as the products' B operand, the weights read
// straight into registers and decoded there (bf16_codes.cuh) as their A operand, two 64-row
// slabs a warpgroup. Up: w1 and w3 rows of the same outputs, the clamped SwiGLU in the epilogue,
// h in bf16; down: w2, f32 rows. The numerics of expert_gemm.h (exact bf16 weights, bf16
// activations, f32 sums, the per-tensor factors on the sums); each output sums its k in one
// fixed order whatever shares its tile.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/expert_gemm.h"

namespace tetra::cuda {

// Whether these kernels take the experts (those expert_gemm_supported() takes, of these
// formats): MXFP4 (ue8m0 scales) or NVFP4, dim and inter multiples of 128, a device of compute
// capability 9.0.
bool expert_wgmma_supported(WeightFormat format, int64_t dim, int64_t inter);

// expert_gemms() on these kernels.
void expert_wgmma_gemms(const ExpertGemmArgs& a, const float* x, int64_t n, int64_t k, const int32_t* order,
                        const int32_t* offsets, float limit, float* y, cudaStream_t stream);

}  // namespace tetra::cuda
