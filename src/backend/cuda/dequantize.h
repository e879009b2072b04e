#pragma once
// Device-side dequantization of a linear layer kept in its checkpoint format: the building
// block that the fused quantized GEMMs share, and the device half of the CPU/GPU parity tests.
#include <cuda_runtime.h>

#include "backend/cuda/device_buffer.h"
#include "model/weights.h"

namespace tetra::cuda {

// A linear layer's tensors uploaded as they are stored in the checkpoint (no bf16 copy).
struct DeviceLinear {
  WeightFormat format = WeightFormat::dense;
  DType weight_dtype = DType::bf16;
  DType scale_dtype = DType::f32;
  int64_t out = 0, in = 0;
  float global_scale = 1;
  DeviceBuffer weight;
  DeviceBuffer scale;
};

DeviceLinear upload_linear(const LinearWeight& w, cudaStream_t stream);

// Writes the exact f32 value of every element, row-major [out, in], into `out` (device memory
// of out*in floats).
void dequantize_to_f32(const DeviceLinear& w, float* out, cudaStream_t stream);

}  // namespace tetra::cuda
