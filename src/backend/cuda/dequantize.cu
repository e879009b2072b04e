#include "backend/cuda/dequantize.h"

#include <algorithm>

#include "backend/cuda/fp4_layout.h"
#include "backend/cuda/scale_checks.h"
#include "backend/cuda/weight_chunk.cuh"

namespace tetra::cuda {
namespace {

__global__ void dequantize_kernel(WeightRef w, float* dst) {
  const int64_t n = w.out * w.in;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x)
    dst[k] = weight_at(w, k / w.in, k % w.in);
}

DeviceBuffer upload(const TensorView& t, cudaStream_t stream) {
  DeviceBuffer b(t.nbytes);
  if (t.nbytes) TETRA_CUDA_CHECK(cudaMemcpyAsync(b.get(), t.data, t.nbytes, cudaMemcpyHostToDevice, stream));
  return b;
}

__global__ void fp4_repack_kernel(uint32_t* words, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    words[i] = fp4_repack(words[i]);
}

// FP4 codes in the device layout (fp4_layout.h), in a buffer of whole words (the last one
// padded with zero codes).
DeviceBuffer upload_fp4(const TensorView& t, cudaStream_t stream) {
  const int64_t words = int64_t((t.nbytes + 3) / 4);
  DeviceBuffer b(size_t(words) * 4);
  if (words == 0) return b;
  TETRA_CUDA_CHECK(cudaMemsetAsync(b.get(), 0, b.bytes(), stream));
  TETRA_CUDA_CHECK(cudaMemcpyAsync(b.get(), t.data, t.nbytes, cudaMemcpyHostToDevice, stream));
  const int threads = 256;
  const int blocks = int(std::min<int64_t>((words + threads - 1) / threads, 4096));
  fp4_repack_kernel<<<blocks, threads, 0, stream>>>(b.get<uint32_t>(), words);
  TETRA_CUDA_CHECK(cudaGetLastError());
  return b;
}

}  // namespace

DeviceLinear upload_linear(const LinearWeight& w, cudaStream_t stream) {
  if (w.format == WeightFormat::nvfp4) check_nvfp4_scales(w);
  DeviceLinear d;
  d.format = w.format;
  d.weight_dtype = w.weight.dtype;
  d.scale_dtype = w.scale.dtype;
  d.out = w.out;
  d.in = w.in;
  d.global_scale = w.global_scale;
  const bool fp4 = w.format == WeightFormat::mxfp4 || w.format == WeightFormat::nvfp4;
  d.weight = fp4 ? upload_fp4(w.weight, stream) : upload(w.weight, stream);
  d.scale = upload(w.scale, stream);
  return d;
}

void dequantize_to_f32(const DeviceLinear& w, float* out, cudaStream_t stream) {
  const int64_t n = w.out * w.in;
  const int threads = 256;
  const int blocks = int(std::min<int64_t>((n + threads - 1) / threads, 4096));
  const WeightRef ref{w.format, w.weight_dtype, w.scale_dtype, w.weight.get(), w.scale.get(), w.global_scale, w.out, w.in};
  dequantize_kernel<<<blocks, threads, 0, stream>>>(ref, out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
