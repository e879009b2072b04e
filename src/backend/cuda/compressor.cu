#include "backend/cuda/compressor.h"

#include "backend/cuda/cuda_check.h"

namespace tetra::cuda {
namespace {

__global__ void add_position_bias_kernel(const float* gate, const float* ape, int64_t n, int64_t width,
                                         int64_t first_position, int64_t ratio, float* out) {
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n * width) return;
  const int64_t t = k / width, i = k % width;
  out[k] = gate[k] + ape[((first_position + t) % ratio) * width + i];
}

// One thread per (window, channel); candidates in the reference's order: previous, current.
__global__ void pool_windows_kernel(const float* kv, const float* gate, const float* prev_kv, const float* prev_gate,
                                    int64_t windows, int64_t ratio, int64_t width, bool overlap, float* out) {
  const int64_t out_w = overlap ? width / 2 : width;
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= windows * out_w) return;
  const int64_t w = k / out_w, ch = k % out_w;
  // previous candidates: rows of window w-1 (stride width) or the carried state (stride out_w)
  const float *pa = nullptr, *pz = nullptr;
  int64_t p_stride = 0;
  if (overlap && w > 0) {
    pa = kv + (w - 1) * ratio * width + ch;
    pz = gate + (w - 1) * ratio * width + ch;
    p_stride = width;
  } else if (overlap && prev_kv) {
    pa = prev_kv + ch;
    pz = prev_gate + ch;
    p_stride = out_w;
  }
  const int64_t off = overlap ? out_w : 0;
  const float* ca = kv + w * ratio * width + off + ch;
  const float* cz = gate + w * ratio * width + off + ch;
  float m = -INFINITY;
  for (int64_t j = 0; pa && j < ratio; ++j) m = fmaxf(m, pz[j * p_stride]);
  for (int64_t j = 0; j < ratio; ++j) m = fmaxf(m, cz[j * width]);
  float s = 0;
  for (int64_t j = 0; pa && j < ratio; ++j) s += expf(pz[j * p_stride] - m);
  for (int64_t j = 0; j < ratio; ++j) s += expf(cz[j * width] - m);
  float sum = 0;
  for (int64_t j = 0; pa && j < ratio; ++j) sum += pa[j * p_stride] * (expf(pz[j * p_stride] - m) / s);
  for (int64_t j = 0; j < ratio; ++j) sum += ca[j * width] * (expf(cz[j * width] - m) / s);
  out[k] = sum;
}

}  // namespace

void add_position_bias(const float* gate, const float* ape, int64_t n, int64_t width, int64_t first_position,
                       int64_t ratio, float* out, cudaStream_t stream) {
  if (n * width == 0) return;
  add_position_bias_kernel<<<unsigned((n * width + 255) / 256), 256, 0, stream>>>(gate, ape, n, width, first_position,
                                                                                  ratio, out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

void pool_windows(const float* kv, const float* gate, const float* prev_kv, const float* prev_gate, int64_t windows,
                  int64_t ratio, int64_t width, bool overlap, float* out, cudaStream_t stream) {
  const int64_t total = windows * (overlap ? width / 2 : width);
  if (total == 0) return;
  pool_windows_kernel<<<unsigned((total + 127) / 128), 128, 0, stream>>>(kv, gate, prev_kv, prev_gate, windows, ratio,
                                                                         width, overlap, out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
