#pragma once
// The CUDA backend: every Backend operation as device kernels, linear weights kept in their
// checkpoint format (dequantized inside the kernels).
#include <memory>

#include "backend/backend.h"

struct CUstream_st;  // cudaStream_t's, without the CUDA headers

namespace tetra {

struct CudaNumerics {
  // The target numerics: linear layers see their activations as bf16 (f32 accumulation), except
  // the router and the head, which stay f32. false: every op in f32, for exact comparisons.
  bool bf16_linear_inputs = true;
  // The tensor-core attention on warpgroup MMA where the device has it (sm_90); false: on
  // mma.sync, as on every other GPU (the two may round differently; tests run both on a Hopper).
  bool warpgroup_mma_attention = true;
};

// On GPU `device` (-1: the calling thread's current device). Throws a runtime Error saying why
// when no usable CUDA device is present.
std::unique_ptr<Backend> make_cuda_backend(CudaNumerics numerics = {}, int device = -1);

// A backend make_cuda_backend made: the stream it queues its work on, and its device (what
// expert parallelism's group orders its copies against). A runtime Error for other backends.
::CUstream_st* cuda_stream_of(Backend& backend);
int cuda_device_of(const Backend& backend);

}  // namespace tetra
