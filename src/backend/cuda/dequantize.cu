#include "backend/cuda/dequantize.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "backend/cuda/fp4_layout.h"
#include "backend/cuda/weight_chunk.cuh"
#include "core/error.h"

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

// The index of the first e4m3 NaN byte (low seven bits all ones) of p[0, n), or n: eight bytes
// at a time (a whole checkpoint's NVFP4 scales are gigabytes; a byte loop took 3.4× as long).
size_t first_e4m3_nan(const uint8_t* p, size_t n) {
  constexpr uint64_t kLow7 = 0x7F7F7F7F7F7F7F7FULL, kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t word;
    std::memcpy(&word, p + i, 8);
    const uint64_t x = (word & kLow7) ^ kLow7;  // a zero byte where the byte is NaN
    if ((x - kOnes) & ~x & kHigh) break;
  }
  for (; i < n; ++i)
    if ((p[i] & 0x7F) == 0x7F) return i;
  return n;
}

// The tensor-core kernels turn NVFP4 scale bytes into bf16 factors with integer operations that
// have no NaN case (bf16_codes.cuh, nvfp4_factors): a NaN scale (0x7F, 0xFF) would become a
// large finite factor, a silent wrong answer, so such a checkpoint fails here by its tensor.
void check_nvfp4_scales(const LinearWeight& w) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(w.scale.data);
  const size_t at = first_e4m3_nan(bytes, w.scale.nbytes);
  if (at == w.scale.nbytes) return;
  const size_t blocks = size_t(w.in / 16);
  const std::string tensor = w.sources.size() > 1 ? w.sources[1] : w.role + " weight_scale";
  model_error(tensor, " (", w.role, "): NVFP4 block scale of row ", at / blocks, ", inputs ", 16 * (at % blocks), "..",
              16 * (at % blocks) + 15, " is NaN (0x", std::hex, int(bytes[at]), ")");
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
