#pragma once
// Block-wide argmax over (value, index) pairs: the larger value wins, ties go to the lower
// index, so selections are deterministic and equal the reference whenever values differ.
#include <cstdint>

namespace tetra::cuda {

struct Candidate {
  float value;
  int64_t index;  // -1: none
};

__device__ __forceinline__ bool better(const Candidate& a, const Candidate& b) {
  if (a.index < 0) return false;
  if (b.index < 0) return true;
  return a.value > b.value || (a.value == b.value && a.index < b.index);
}

__device__ __forceinline__ Candidate block_argmax(Candidate c) {
  __shared__ float values[32];
  __shared__ int64_t indices[32];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const Candidate o{__shfl_xor_sync(0xFFFFFFFFu, c.value, off), __shfl_xor_sync(0xFFFFFFFFu, c.index, off)};
    if (better(o, c)) c = o;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, warps = blockDim.x / 32;
  __syncthreads();
  if (lane == 0) {
    values[warp] = c.value;
    indices[warp] = c.index;
  }
  __syncthreads();
  Candidate best{0, -1};
  for (int i = 0; i < warps; ++i)
    if (const Candidate o{values[i], indices[i]}; better(o, best)) best = o;
  return best;
}

}  // namespace tetra::cuda
