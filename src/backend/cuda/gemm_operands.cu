#include "backend/cuda/gemm_operands.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/bf16_codes.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/formats.cuh"
#include "backend/cuda/fp4_layout.h"

namespace tetra::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kVector = 8;  // elements per thread in the vectorized dequantization

unsigned grid_for(int64_t work) { return unsigned(std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, 65536)); }

__device__ __forceinline__ float block_scale(const WeightRef& w, int64_t index) {
  return w.scale_dtype == DType::f32 ? static_cast<const float*>(w.scale)[index]
                                     : decode_e8m0(static_cast<const uint8_t*>(w.scale)[index]);
}

// The scale shared by elements (o, i .. i+7) (i a multiple of 8), per-tensor factor left out.
__device__ __forceinline__ float group_scale(const WeightRef& w, int64_t o, int64_t i) {
  switch (w.format) {
    case WeightFormat::fp8_block: return block_scale(w, (o / 128) * ((w.in + 127) / 128) + i / 128);
    case WeightFormat::mxfp4: return block_scale(w, o * (w.in / 32) + i / 32);
    case WeightFormat::nvfp4: return decode_e4m3(static_cast<const uint8_t*>(w.scale)[o * (w.in / 16) + i / 16]);
    case WeightFormat::dense:
    case WeightFormat::fp8_tensor: break;
  }
  return 1.0f;
}

// Exact values of elements (o, i .. i+7) before the per-tensor factor.
__device__ __forceinline__ void load8(const WeightRef& w, int64_t o, int64_t i, float (&v)[kVector]) {
  const int64_t k = o * w.in + i;
  const auto* bytes = static_cast<const uint8_t*>(w.weight);
  if (w.format == WeightFormat::mxfp4 || w.format == WeightFormat::nvfp4) {
    const uint32_t word = fp4_unrepack(*reinterpret_cast<const uint32_t*>(bytes + k / 2));
    const float s = group_scale(w, o, i);
#pragma unroll
    for (int j = 0; j < kVector; ++j) v[j] = decode_e2m1(uint8_t((word >> (4 * j)) & 0xF)) * s;
    return;
  }
  if (w.format != WeightFormat::dense) {  // fp8
    const uint2 q = *reinterpret_cast<const uint2*>(bytes + k);
    const float s = group_scale(w, o, i);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[j] = decode_e4m3(uint8_t((q.x >> (8 * j)) & 0xFF)) * s;
      v[4 + j] = decode_e4m3(uint8_t((q.y >> (8 * j)) & 0xFF)) * s;
    }
    return;
  }
  if (w.weight_dtype == DType::f32) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(w.weight) + k);
    const float4 a = p[0], b = p[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    return;
  }
  const uint4 q = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(w.weight) + k);
  const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (w.weight_dtype == DType::bf16) {
      v[2 * j] = decode_bf16(uint16_t(words[j] & 0xFFFF));
      v[2 * j + 1] = decode_bf16(uint16_t(words[j] >> 16));
    } else {
      v[2 * j] = __half2float(__ushort_as_half(uint16_t(words[j] & 0xFFFF)));
      v[2 * j + 1] = __half2float(__ushort_as_half(uint16_t(words[j] >> 16)));
    }
  }
}

// Exact value of element (o, i) before the per-tensor factor (rows whose width is not a
// multiple of 8).
__device__ __forceinline__ float load1(const WeightRef& w, int64_t o, int64_t i) {
  const int64_t k = o * w.in + i;
  const auto* bytes = static_cast<const uint8_t*>(w.weight);
  switch (w.format) {
    case WeightFormat::dense:
      return w.weight_dtype == DType::f32    ? static_cast<const float*>(w.weight)[k]
             : w.weight_dtype == DType::bf16 ? decode_bf16(static_cast<const uint16_t*>(w.weight)[k])
                                             : __half2float(static_cast<const __half*>(w.weight)[k]);
    case WeightFormat::fp8_block:
    case WeightFormat::fp8_tensor: return decode_e4m3(bytes[k]) * group_scale(w, o, i);
    case WeightFormat::mxfp4:
    case WeightFormat::nvfp4: return decode_e2m1(fp4_weight_code(bytes, k)) * group_scale(w, o, i);
  }
  return 0;
}

template <class T>
__device__ __forceinline__ void store8(T* dst, const float (&v)[kVector]);
template <>
__device__ __forceinline__ void store8(__nv_bfloat16* dst, const float (&v)[kVector]) {
  __nv_bfloat162 p[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) p[j] = __floats2bfloat162_rn(v[2 * j], v[2 * j + 1]);
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(p);
}
template <>
__device__ __forceinline__ void store8(float* dst, const float (&v)[kVector]) {
  reinterpret_cast<float4*>(dst)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(dst)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

__device__ __forceinline__ void store1(__nv_bfloat16* dst, float v) { *dst = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store1(float* dst, float v) { *dst = v; }

template <class T>
__global__ void dequantize_vector_kernel(WeightRef w, int64_t row0, int64_t rows, T* tile) {
  const int64_t per_row = w.in / kVector, n = rows * per_row;
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < n; g += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = g / per_row, i = (g % per_row) * kVector;
    float v[kVector];
    load8(w, row0 + r, i, v);
    store8(tile + r * w.in + i, v);
  }
}

template <class T>
__global__ void dequantize_scalar_kernel(WeightRef w, int64_t row0, int64_t rows, T* tile) {
  const int64_t n = rows * w.in;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x)
    store1(tile + k, load1(w, row0 + k / w.in, k % w.in));
}

__global__ void round_kernel(const float* x, int64_t count, __nv_bfloat16* out) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < count; k += int64_t(gridDim.x) * blockDim.x)
    out[k] = __float2bfloat16_rn(x[k]);
}

// round_kernel eight values a thread (two 16-byte loads, one 16-byte store): the one-value kernel
// moved ~1.7 TB/s on the prefill's activations. Rounds to nearest even like it, so the same bits.
__global__ void round8_kernel(const float4* x, int64_t groups, uint4* out) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < groups; k += int64_t(gridDim.x) * blockDim.x) {
    const float4 a = x[2 * k], b = x[2 * k + 1];
    const __nv_bfloat162 v[4] = {__floats2bfloat162_rn(a.x, a.y), __floats2bfloat162_rn(a.z, a.w),
                                 __floats2bfloat162_rn(b.x, b.y), __floats2bfloat162_rn(b.z, b.w)};
    out[k] = *reinterpret_cast<const uint4*>(v);
  }
}

// x[i] = plane 0 + plane 1 + plane 2 exactly (each plane `count` bf16 values), four values a thread.
__global__ void split3_kernel(const float4* x, int64_t quads, uint2* out) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < quads; k += int64_t(gridDim.x) * blockDim.x) {
    const float4 v = x[k];
    uint32_t low[3], high[3];
    activation_pairs<3>(v.x, v.y, low);
    activation_pairs<3>(v.z, v.w, high);
#pragma unroll
    for (int p = 0; p < 3; ++p) out[p * quads + k] = make_uint2(low[p], high[p]);
  }
}

template <class T>
__global__ void gather_kernel(const float* x, int64_t width, const int32_t* order, int64_t rows, int64_t k, T* out) {
  const int64_t n = rows * width;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = e / width;
    store1(out + e, x[int64_t(order[r] / k) * width + e % width]);
  }
}

template <class T>
void dequantize_as(const WeightRef& w, int64_t row0, int64_t rows, T* tile, cudaStream_t stream) {
  if (w.in % kVector == 0)
    dequantize_vector_kernel<<<grid_for(rows * w.in / kVector), kThreads, 0, stream>>>(w, row0, rows, tile);
  else
    dequantize_scalar_kernel<<<grid_for(rows * w.in), kThreads, 0, stream>>>(w, row0, rows, tile);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void dequantize_rows(const WeightRef& w, int64_t row0, int64_t rows, OperandType type, void* tile, cudaStream_t stream) {
  if (rows * w.in == 0) return;
  if (type == OperandType::bf16)
    dequantize_as(w, row0, rows, static_cast<__nv_bfloat16*>(tile), stream);
  else
    dequantize_as(w, row0, rows, static_cast<float*>(tile), stream);
}

void round_to_bf16(const float* x, int64_t count, void* out, cudaStream_t stream) {
  if (count == 0) return;
  if (count % 8 == 0 && (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(out)) % 16 == 0)
    round8_kernel<<<grid_for(count / 8), kThreads, 0, stream>>>(reinterpret_cast<const float4*>(x), count / 8,
                                                               static_cast<uint4*>(out));
  else
    round_kernel<<<grid_for(count), kThreads, 0, stream>>>(x, count, static_cast<__nv_bfloat16*>(out));
  TETRA_CUDA_CHECK(cudaGetLastError());
}

void split_to_bf16x3(const float* x, int64_t count, void* out, cudaStream_t stream) {
  if (count == 0) return;
  if (count % 4 != 0 || (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(out)) % 16 != 0)
    runtime_error("cuda split_to_bf16x3: ", count, " values at unaligned addresses (needs a multiple of 4, 16-byte aligned)");
  split3_kernel<<<grid_for(count / 4), kThreads, 0, stream>>>(reinterpret_cast<const float4*>(x), count / 4,
                                                             static_cast<uint2*>(out));
  TETRA_CUDA_CHECK(cudaGetLastError());
}

void gather_expert_rows(const float* x, int64_t width, const int32_t* order, int64_t rows, int64_t k, OperandType type,
                 void* out, cudaStream_t stream) {
  if (rows * width == 0) return;
  if (type == OperandType::bf16)
    gather_kernel<<<grid_for(rows * width), kThreads, 0, stream>>>(x, width, order, rows, k,
                                                                  static_cast<__nv_bfloat16*>(out));
  else
    gather_kernel<<<grid_for(rows * width), kThreads, 0, stream>>>(x, width, order, rows, k, static_cast<float*>(out));
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
