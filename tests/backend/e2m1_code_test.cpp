// The device's e2m1 encoder (backend/cuda/e2m1_code.h) against the CPU reference's f32_to_e2m1:
// the same code for every float near the grid's values and midpoints (where rounding and ties
// decide), at its edges (zeros, subnormals, saturation, infinities, NaN) and for random bits.
#include "backend/cuda/e2m1_code.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "core/dtype.h"

namespace tetra::cuda {
namespace {

void expect_reference_code(float x) {
  ASSERT_EQ(e2m1_code(x), f32_to_e2m1(x)) << std::hexfloat << x << " (bits 0x" << std::hex
                                          << std::bit_cast<uint32_t>(x) << ")";
}

TEST(E2m1Code, EqualsTheReferenceNearGridValuesAndMidpoints) {
  // the grid values, the midpoints between them, and the saturation edge, scaled by 2^-3 .. 2^3
  // (the encoders' inputs are scaled by a power of two first), each with 4096 neighbours a side
  const float points[] = {0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 5.0f, 6.0f, 7.0f};
  for (float p : points)
    for (int scale = -3; scale <= 3; ++scale)
      for (float sign : {1.0f, -1.0f}) {
        const uint32_t center = std::bit_cast<uint32_t>(std::ldexp(p, scale));
        for (uint32_t d = 0; d <= 8192; ++d) expect_reference_code(sign * std::bit_cast<float>(center - 4096 + d));
      }
}

TEST(E2m1Code, EqualsTheReferenceAtTheEdges) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (float x : {0.0f, -0.0f, std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::min(), std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                  inf, -inf, nan, -nan, 1e-30f, -1e-30f, 6.5f, 1e30f})
    expect_reference_code(x);
}

TEST(E2m1Code, EqualsTheReferenceForRandomBits) {
  std::mt19937 rng(11);
  for (int i = 0; i < 1 << 21; ++i) expect_reference_code(std::bit_cast<float>(uint32_t(rng())));
}

}  // namespace
}  // namespace tetra::cuda
