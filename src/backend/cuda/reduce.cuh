#pragma once
// Warp-wide and block-wide sums (blocks of a multiple of 32 threads, at most 1024); every
// thread gets the same result.
namespace tetra::cuda {

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, off);
  return v;
}

__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  v = warp_sum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, warps = blockDim.x / 32;
  __syncthreads();  // partial may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float s = 0;
  for (int i = 0; i < warps; ++i) s += partial[i];  // same order in every thread
  return s;
}

}  // namespace tetra::cuda
