#include "backend/cuda/cache_codec.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/formats.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/rope.cuh"

namespace tetra::cuda {
namespace {

constexpr int64_t kFp8Block = 64;
constexpr int64_t kFp4Block = 32;


constexpr int kEncodeThreads = 256;

unsigned blocks_for(int64_t n) { return unsigned((n + 255) / 256); }

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, off));
  return v;
}

// One block per row, one warp per 64-value scale block (two values a lane, loaded together),
// every thread some rope dims and padding bytes.
__global__ void __launch_bounds__(kEncodeThreads)
    encode_kv_fp8_kernel(const float* rows, int64_t d, int64_t rope_dim, int64_t row_bytes, uint8_t* out) {
  wait_for_inputs();
  allow_next_kernel();
  constexpr int kPerLane = int(kFp8Block / 32);
  const float* row = rows + int64_t(blockIdx.x) * d;
  uint8_t* o = out + int64_t(blockIdx.x) * row_bytes;
  const int64_t nope = d - rope_dim, blocks = (nope + kFp8Block - 1) / kFp8Block;
  uint8_t* scales = o + nope + 2 * rope_dim;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  for (int64_t b = warp; b < blocks; b += kEncodeThreads / 32) {
    const int64_t begin = b * kFp8Block, end = min(nope, begin + kFp8Block);
    float v[kPerLane];
    float amax = 0;
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) {
      const int64_t i = begin + lane + 32 * u;
      v[u] = i < end ? row[i] : 0.0f;
      amax = fmaxf(amax, fabsf(v[u]));
    }
    const int e = ceil_log2(fmaxf(warp_max(amax), 1e-4f) / 448.0f);
    const float inv = ldexpf(1.0f, -e);
#pragma unroll
    for (int u = 0; u < kPerLane; ++u)
      if (const int64_t i = begin + lane + 32 * u; i < end) o[i] = encode_e4m3(v[u] * inv);
    if (lane == 0) scales[b] = uint8_t(e + 127);
  }
  for (int64_t b = blocks + threadIdx.x; b < row_bytes - (nope + 2 * rope_dim); b += blockDim.x) scales[b] = 0;  // padding
  for (int64_t i = threadIdx.x; i < rope_dim; i += blockDim.x) {
    const uint16_t bits = encode_bf16(row[nope + i]);
    o[nope + 2 * i] = uint8_t(bits & 0xFF);
    o[nope + 2 * i + 1] = uint8_t(bits >> 8);
  }
}

__global__ void decode_kv_fp8_kernel(const uint8_t* bytes, int64_t n, int64_t d, int64_t rope_dim, int64_t row_bytes,
                                     float* out) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n * d) return;
  const int64_t r = k / d, i = k % d, nope = d - rope_dim;
  const uint8_t* in = bytes + r * row_bytes;
  out[k] = i < nope ? decode_e4m3(in[i]) * decode_e8m0(in[nope + 2 * rope_dim + i / kFp8Block])
                    : decode_bf16(uint16_t(in[nope + 2 * (i - nope)] | (in[nope + 2 * (i - nope) + 1] << 8)));
}

__global__ void encode_bf16_kernel(const float* values, int64_t count, uint8_t* out) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= count) return;
  const uint16_t bits = encode_bf16(values[k]);
  out[2 * k] = uint8_t(bits & 0xFF);
  out[2 * k + 1] = uint8_t(bits >> 8);
}

__global__ void decode_bf16_kernel(const uint8_t* bytes, int64_t count, float* out) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k < count) out[k] = decode_bf16(uint16_t(bytes[2 * k] | (bytes[2 * k + 1] << 8)));
}

// The row v (d values in shared memory, the whole block) through the butterflies of the
// reference's Walsh-Hadamard loop stage by stage (each value sees the same additions), scaled by
// 1/√d.
__device__ void hadamard_rotate(float* v, int64_t d) {
  for (int64_t len = 1; len < d; len <<= 1) {
    for (int64_t p = threadIdx.x; p < d / 2; p += blockDim.x) {
      const int64_t j = (p / len) * 2 * len + p % len;
      const float a = v[j], b = v[j + len];
      v[j] = a + b;
      v[j + len] = a - b;
    }
    __syncthreads();
  }
  const float norm = 1.0f / sqrtf(float(d));
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) v[i] *= norm;
  __syncthreads();
}

// The exponent e of a 32-value block's power-of-two scale 2^e, from the block's largest magnitude,
// and the value of code under it: the fp4 rule of the indexer's keys, which its queries copy.
__device__ __forceinline__ int fp4_block_exponent(float amax) {
  return ceil_log2(fmaxf(amax, ldexpf(6.0f, -126)) / 6.0f);
}
__device__ __forceinline__ float fp4_value(uint8_t code, int e) {
  return decode_e2m1(code) * decode_e8m0(uint8_t(e + 127));
}

// Each 32-value block of the row v as e2m1 codes under a power-of-two scale 2^e, a warp per
// block and a lane per value: emit(block, i, code, e) on every lane of the warp (code 0 for i ≥ d).
template <class Emit>
__device__ void fp4_blocks(const float* v, int64_t d, Emit&& emit) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  for (int64_t b = warp; b * kFp4Block < d; b += blockDim.x / 32) {
    const int64_t i = b * kFp4Block + lane;
    const float x = i < d ? v[i] : 0.0f;
    const int e = fp4_block_exponent(warp_max(fabsf(x)));
    emit(b, i, i < d ? encode_e2m1(x * ldexpf(1.0f, -e)) : uint8_t(0), e);
  }
}

// One block per row, the row in shared memory: rotated, then one warp per 32-value block picks
// the scale and packs the codes.
__global__ void encode_indexer_fp4_kernel(const float* rows, int64_t d, int64_t row_bytes, uint8_t* out) {
  wait_for_inputs();
  allow_next_kernel();
  extern __shared__ float v[];
  const float* row = rows + int64_t(blockIdx.x) * d;
  uint8_t* o = out + int64_t(blockIdx.x) * row_bytes;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) v[i] = row[i];
  __syncthreads();
  hadamard_rotate(v, d);
  uint8_t* scales = o + d / 2;
  fp4_blocks(v, d, [&](int64_t b, int64_t i, uint8_t code, int e) {
    const uint8_t next = uint8_t(__shfl_down_sync(0xFFFFFFFFu, code, 1));
    if (i % 2 == 0 && i < d) o[i / 2] = uint8_t(code | (next << 4));
    if (i % kFp4Block == 0) scales[b] = uint8_t(e + 127);
  });
}

// One block per head of a query row (rope on its last 2·half values, at the row's position),
// then the fp4 round trip of the keys' encoding: each value its code times its block's scale,
// the values decode_indexer_fp4 gives for encode_indexer_fp4's bytes.
__global__ void rotated_indexer_query_fp4_kernel(const float* q, const int32_t* positions, const float* inv_freq,
                                                 int64_t heads, int64_t d, int64_t half, float* out) {
  wait_for_inputs();
  allow_next_kernel();
  extern __shared__ float v[];
  const int64_t head_row = blockIdx.x;
  const float position = float(positions[head_row / heads]);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) v[i] = q[head_row * d + i];
  __syncthreads();
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x)  // f32 angle, as the reference computes it
    rotate_pair(v[d - 2 * half + 2 * i], v[d - 2 * half + 2 * i + 1], inv_freq[i] * position, false);
  __syncthreads();
  hadamard_rotate(v, d);
  fp4_blocks(v, d, [&](int64_t, int64_t i, uint8_t code, int e) {
    if (i < d) out[head_row * d + i] = fp4_value(code, e);
  });
}

// The same for many rows: a warp per head of a query row, V = d / 32 consecutive values a lane
// (on the H200, 20 layers of V4-Flash prefilling 8192 tokens: 0.397 s with the block kernel,
// 0.388 s with this one; at decode the block kernel, whose heads spread over more SMs, made the
// step 0.8% faster). Rope on the head's last 2·half values, the Hadamard rotation (its first log2 V
// stages inside a lane, the rest across lanes; every value sees hadamard_rotate's additions in
// its order), then the fp4 round trip, each 32-value block on 32 / V lanes: bit for bit the
// block kernel's values.
constexpr int kQueryWarps = 8;
constexpr int64_t kWarpPerHeadFrom = 16384;  // head rows: 256 tokens of V4's 64 heads
template <int V>
__global__ void __launch_bounds__(kQueryWarps * 32)
    rotated_indexer_query_fp4_warps_kernel(const float* q, const int32_t* positions, const float* inv_freq,
                                           int64_t head_rows, int64_t heads, int64_t half, float* out) {
  static_assert(V == 2 || V == 4, "a lane holds whole rope pairs of a 32-value block");
  constexpr int d = 32 * V, kBlockLanes = int(kFp4Block) / V;
  wait_for_inputs();
  allow_next_kernel();
  const int64_t head_row = int64_t(blockIdx.x) * kQueryWarps + threadIdx.x / 32;
  if (head_row >= head_rows) return;  // the whole warp
  const int lane = threadIdx.x & 31;
  float v[V];
#pragma unroll
  for (int i = 0; i < V; ++i) v[i] = q[head_row * d + lane * V + i];
  const float position = float(positions[head_row / heads]);
  const int64_t first_rotated = d - 2 * half;
#pragma unroll
  for (int i = 0; i < V; i += 2)  // f32 angle, as the reference computes it
    if (const int64_t p = lane * V + i; p >= first_rotated)
      rotate_pair(v[i], v[i + 1], inv_freq[(p - first_rotated) / 2] * position, false);
#pragma unroll
  for (int len = 1; len < V; len <<= 1)
#pragma unroll
    for (int i = 0; i < V; ++i)
      if (!(i & len)) {
        const float a = v[i], b = v[i + len];
        v[i] = a + b;
        v[i + len] = a - b;
      }
#pragma unroll
  for (int len = V; len < d; len <<= 1) {
    const int partner = len / V;
    const bool high = lane & partner;  // holds the second value of each of its pairs
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const float other = __shfl_xor_sync(0xFFFFFFFFu, v[i], partner);
      v[i] = high ? other - v[i] : v[i] + other;
    }
  }
  const float norm = 1.0f / sqrtf(float(d));
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    v[i] *= norm;
    amax = fmaxf(amax, fabsf(v[i]));
  }
#pragma unroll
  for (int off = kBlockLanes / 2; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, off));
  const int e = fp4_block_exponent(amax);
  const float inv = ldexpf(1.0f, -e);
#pragma unroll
  for (int i = 0; i < V; ++i) out[head_row * d + lane * V + i] = fp4_value(encode_e2m1(v[i] * inv), e);
}

__global__ void decode_indexer_fp4_kernel(const uint8_t* bytes, int64_t n, int64_t d, int64_t row_bytes, float* out) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n * d) return;
  const int64_t r = k / d, i = k % d;
  const uint8_t* in = bytes + r * row_bytes;
  out[k] = decode_e2m1(fp4_code(in, i)) * decode_e8m0(in[d / 2 + i / kFp4Block]);
}

}  // namespace

void encode_kv_fp8(const float* rows, int64_t n, int64_t d, int64_t rope_dim, uint8_t* out, cudaStream_t stream) {
  if (n == 0) return;
  launch_early(encode_kv_fp8_kernel, dim3(unsigned(n)), dim3(kEncodeThreads), 0, stream, rows, d, rope_dim,
               kv_fp8_row_bytes(d, rope_dim), out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

void decode_kv_fp8(const uint8_t* bytes, int64_t n, int64_t d, int64_t rope_dim, float* out, cudaStream_t stream) {
  if (n * d == 0) return;
  launch_early(decode_kv_fp8_kernel, dim3(blocks_for(n * d)), dim3(256), 0, stream, bytes, n, d, rope_dim,
               kv_fp8_row_bytes(d, rope_dim), out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

void encode_bf16(const float* values, int64_t count, uint8_t* out, cudaStream_t stream) {
  if (count == 0) return;
  launch_early(encode_bf16_kernel, dim3(blocks_for(count)), dim3(256), 0, stream, values, count, out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

void decode_bf16(const uint8_t* bytes, int64_t count, float* out, cudaStream_t stream) {
  if (count == 0) return;
  launch_early(decode_bf16_kernel, dim3(blocks_for(count)), dim3(256), 0, stream, bytes, count, out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

void encode_indexer_fp4(const float* rows, int64_t n, int64_t d, uint8_t* out, cudaStream_t stream) {
  if (d <= 0 || (d & (d - 1))) runtime_error("cuda indexer fp4: the Hadamard rotation needs a power-of-two size, got ", d);
  if (n == 0) return;
  launch_early(encode_indexer_fp4_kernel, dim3(unsigned(n)), dim3(128), size_t(d) * sizeof(float), stream, rows, d,
               indexer_fp4_row_bytes(d), out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

void rotated_indexer_query_fp4(const float* q, const int32_t* positions, const float* inv_freq, int64_t half,
                               int64_t rows, int64_t heads, int64_t d, float* out, cudaStream_t stream) {
  if (d <= 0 || (d & (d - 1))) runtime_error("cuda indexer fp4: the Hadamard rotation needs a power-of-two size, got ", d);
  if (2 * half > d) runtime_error("cuda indexer query: ", 2 * half, " rotated values in a head of ", d);
  const int64_t head_rows = rows * heads;
  if (head_rows == 0) return;
  if (head_rows < kWarpPerHeadFrom || (d != 64 && d != 128)) {
    launch_early(rotated_indexer_query_fp4_kernel, dim3(unsigned(head_rows)), dim3(128), size_t(d) * sizeof(float),
                 stream, q, positions, inv_freq, heads, d, half, out);
  } else {
    const dim3 grid(unsigned((head_rows + kQueryWarps - 1) / kQueryWarps)), block(kQueryWarps * 32);
    if (d == 64)
      launch_early(rotated_indexer_query_fp4_warps_kernel<2>, grid, block, 0, stream, q, positions, inv_freq,
                   head_rows, heads, half, out);
    else
      launch_early(rotated_indexer_query_fp4_warps_kernel<4>, grid, block, 0, stream, q, positions, inv_freq,
                   head_rows, heads, half, out);
  }
  TETRA_CUDA_CHECK(cudaGetLastError());
}

void decode_indexer_fp4(const uint8_t* bytes, int64_t n, int64_t d, float* out, cudaStream_t stream) {
  if (n * d == 0) return;
  launch_early(decode_indexer_fp4_kernel, dim3(blocks_for(n * d)), dim3(256), 0, stream, bytes, n, d,
               indexer_fp4_row_bytes(d), out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
