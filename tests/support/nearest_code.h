#pragma once
// Independent rounding for quantizer tests: the nearest code of a small float format found by
// brute force over its code table, not by the production rounding code.
#include <cmath>
#include <cstdint>

namespace tetra::testing {

// Nearest code to x among the `n` non-negative codes of `decode` (ties to the even code), with
// x's sign bit (`sign`) set for negative x: the sign is kept even when the magnitude rounds to 0.
inline uint8_t brute_force_nearest(double x, int n, float (*decode)(uint8_t), uint8_t sign = 0) {
  int best = -1;
  double best_d = INFINITY;
  for (int c = 0; c < n; ++c) {
    const double v = decode(uint8_t(c));
    if (std::isnan(v)) continue;
    const double d = std::fabs(v - std::fabs(x));
    if (d < best_d || (d == best_d && c % 2 == 0)) {
      best = c;
      best_d = d;
    }
  }
  return uint8_t(best | (std::signbit(x) ? sign : 0));
}

}  // namespace tetra::testing
