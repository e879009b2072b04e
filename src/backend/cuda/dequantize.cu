#include "backend/cuda/dequantize.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace tetra::cuda {
namespace {

// Exact decoders. e4m3 goes through the hardware conversion; e2m1 and e8m0 are tiny formats
// whose values are cheaper to compute than to look up.
__device__ __forceinline__ float e4m3(uint8_t b) {
  __nv_fp8_e4m3 v;
  v.__x = b;
  return float(v);
}
__device__ __forceinline__ float e8m0(uint8_t b) { return b == 0xFF ? __int_as_float(0x7FC00000) : ldexpf(1.0f, int(b) - 127); }
__device__ __forceinline__ float e2m1(uint8_t code) {
  const float magnitude[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  const float v = magnitude[code & 7];
  return (code & 8) ? -v : v;
}
__device__ __forceinline__ uint8_t fp4_code(const uint8_t* packed, int64_t i) {
  const uint8_t b = packed[i >> 1];
  return (i & 1) ? (b >> 4) : (b & 0xF);
}
__device__ __forceinline__ float scale_value(const void* s, DType t, int64_t i) {
  return t == DType::f32 ? static_cast<const float*>(s)[i] : e8m0(static_cast<const uint8_t*>(s)[i]);
}

__global__ void dequantize_kernel(WeightFormat format, DType wt, DType st, const void* weight, const void* scale,
                                  float global_scale, int64_t out, int64_t in, float* dst) {
  const int64_t n = out * in;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = k / in, i = k % in;
    const auto* bytes = static_cast<const uint8_t*>(weight);
    float v = 0;
    switch (format) {
      case WeightFormat::dense:
        v = wt == DType::f32    ? static_cast<const float*>(weight)[k]
            : wt == DType::bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(weight)[k])
                                : __half2float(static_cast<const __half*>(weight)[k]);
        break;
      case WeightFormat::fp8_block:
        v = e4m3(bytes[k]) * scale_value(scale, st, (o / 128) * ((in + 127) / 128) + i / 128);
        break;
      case WeightFormat::fp8_tensor: v = e4m3(bytes[k]) * static_cast<const float*>(scale)[0]; break;
      case WeightFormat::mxfp4: v = e2m1(fp4_code(bytes, k)) * scale_value(scale, st, o * (in / 32) + i / 32); break;
      case WeightFormat::nvfp4:
        v = e2m1(fp4_code(bytes, k)) * e4m3(static_cast<const uint8_t*>(scale)[o * (in / 16) + i / 16]) * global_scale;
        break;
    }
    dst[k] = v;
  }
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
  dequantize_kernel<<<blocks, threads, 0, stream>>>(w.format, w.weight_dtype, w.scale_dtype, w.weight.get(),
                                                    w.scale.get(), w.global_scale, w.out, w.in, out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
