#pragma once
// The rotation of interleaved RoPE, shared by every kernel that applies it.

namespace tetra::cuda {

// Rotates the pair (a, b) by angle (by -angle when inverse): the one formula of every kernel,
// its roundings spelled out so that no kernel contracts it differently.
__device__ __forceinline__ void rotate_pair(float& a, float& b, float angle, bool inverse) {
  const float c = cosf(angle), s = inverse ? -sinf(angle) : sinf(angle);
  const float a0 = a, b0 = b;
  a = __fsub_rn(__fmul_rn(a0, c), __fmul_rn(b0, s));
  b = __fadd_rn(__fmul_rn(b0, c), __fmul_rn(a0, s));
}

}  // namespace tetra::cuda
