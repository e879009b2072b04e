#pragma once
// The e2m1 (FP4) code of a float as the caches and the indexer's queries store it: rounded to
// nearest even, saturated to +-6, NaN to 0, the sign kept (bit 3) even for zero. The grid's steps
// are 0.5 below 2, 1 below 4 and 2 up to 6, so a magnitude rounds in its step's units with one
// rint and the code follows from the rounded value: a tenth of the operations of a general
// encoder (frexpf, ldexpf, divisions), which bounded the indexer's fp4 query at a prefill
// (8192 rows × 64 heads). Plain C++ as well, so that the CPU tests hold it to core/dtype.cpp's
// f32_to_e2m1 (backend/e2m1_code_test.cpp).
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define TETRA_E2M1_HD __host__ __device__ __forceinline__
#else
#define TETRA_E2M1_HD inline
#endif

namespace tetra::cuda {

TETRA_E2M1_HD uint8_t e2m1_code(float x) {
  if (x != x) return 0;  // NaN
  const float a = fminf(fabsf(x), 6.0f);
  const float step = a < 2.0f ? 0.5f : a < 4.0f ? 1.0f : 2.0f;
  const float v = rintf(a * (1.0f / step)) * step;  // exact: powers of two
  const uint32_t m = v < 2.0f ? uint32_t(v * 2.0f) : v < 4.0f ? uint32_t(v) + 2 : uint32_t(v * 0.5f) + 4;
  return uint8_t((copysignf(1.0f, x) < 0.0f ? 0x8u : 0u) | m);
}

}  // namespace tetra::cuda
