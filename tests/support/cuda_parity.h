#pragma once
// Shared pieces of the CUDA parity tests: both backends side by side (skipping with the reason
// when no GPU is usable), random inputs, and relative differences.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device.h"

namespace tetra::testing {

// Skips the calling test (GTEST_SKIP returns from it) when no device is usable.
#define TETRA_REQUIRE_GPU()                                                               \
  do {                                                                                    \
    const ::tetra::cuda::DeviceStatus tetra_device = ::tetra::cuda::probe_device();      \
    if (!tetra_device.usable) GTEST_SKIP() << "GPU test skipped: " << tetra_device.description; \
  } while (0)

inline std::vector<float> random_values(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// ||a - b|| / ||b|| (0 when both are zero).
inline double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

}  // namespace tetra::testing
