#include "backend/cuda/elementwise.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/swiglu.cuh"

namespace tetra::cuda {
namespace {

unsigned blocks_for(int64_t n) { return unsigned((n + 255) / 256); }

__global__ void gather_rows_kernel(const float* table, int64_t table_rows, int64_t width, const int32_t* ids, int64_t n,
                                   float* out) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n * width) return;
  const int64_t r = k / width;
  const int32_t id = ids[r];
  if (id < 0 || id >= table_rows) __trap();
  out[k] = table[int64_t(id) * width + k % width];
}

__global__ void add_kernel(const float* a, const float* b, int64_t n, float* out) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k < n) out[k] = a[k] + b[k];
}

__global__ void swiglu_kernel(const float* gate, const float* up, int64_t n, float limit, float* out) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n) return;
  out[k] = clamped_swiglu(gate[k], up[k], limit);
}

}  // namespace

void gather_rows(const float* table, int64_t table_rows, int64_t width, const int32_t* ids, int64_t n, float* out,
                 cudaStream_t stream) {
  if (n * width == 0) return;
  launch_early(gather_rows_kernel, dim3(blocks_for(n * width)), dim3(256), 0, stream, table, table_rows, width, ids, n,
               out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

void add(const float* a, const float* b, int64_t n, float* out, cudaStream_t stream) {
  if (n == 0) return;
  launch_early(add_kernel, dim3(blocks_for(n)), dim3(256), 0, stream, a, b, n, out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

void swiglu(const float* gate, const float* up, int64_t n, float limit, float* out, cudaStream_t stream) {
  if (n == 0) return;
  launch_early(swiglu_kernel, dim3(blocks_for(n)), dim3(256), 0, stream, gate, up, n, limit > 0 ? limit : INFINITY,
               out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
