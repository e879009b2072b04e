#pragma once
// The clamped SwiGLU of V4's feed-forward layers, the one formula every kernel uses (element-wise,
// fused into the shared expert's linear, the decode and prefill expert kernels), so that fused
// and unfused paths agree bit for bit: the gate clamped above at limit, the up value to ±limit,
// then gate · sigmoid(gate) · up.
namespace tetra::cuda {

__device__ __forceinline__ float clamped_swiglu(float gate, float up, float limit) {
  const float g = fminf(gate, limit), u = fminf(fmaxf(up, -limit), limit);
  return g * (1.0f / (1.0f + expf(-g))) * u;
}

}  // namespace tetra::cuda
