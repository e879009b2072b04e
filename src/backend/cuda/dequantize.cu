#include "backend/cuda/dequantize.h"

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

}  // namespace

DeviceLinear upload_linear(const LinearWeight& w, cudaStream_t stream) {
  DeviceLinear d;
  d.format = w.format;
  d.weight_dtype = w.weight.dtype;
  d.scale_dtype = w.scale.dtype;
  d.out = w.out;
  d.in = w.in;
  d.global_scale = w.global_scale;
  d.weight = upload(w.weight, stream);
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
