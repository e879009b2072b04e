#pragma once
// NaN and infinite values among a step's outputs: any at all means the step computed garbage.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>

namespace tetra {

inline int64_t count_nonfinite(std::span<const float> values) {
  return int64_t(std::count_if(values.begin(), values.end(), [](float v) { return !std::isfinite(v); }));
}

}  // namespace tetra
