#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace tetra {

std::vector<float> rope_inv_freq(const ModelConfig& c, bool compressed_layer) {
  const int64_t d = c.rope_dim, half = d / 2;
  const double base = compressed_layer ? c.compress_rope_theta : c.rope_theta;
  std::vector<float> pos_freq(static_cast<size_t>(half)), inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    pos_freq[size_t(i)] = float(std::pow(base, double(float(2 * i) / float(d))));
    inv[size_t(i)] = 1.0f / pos_freq[size_t(i)];
  }
  if (!compressed_layer || !c.yarn.enabled) return inv;
  const YarnScaling& y = c.yarn;
  auto correction_dim = [&](double rotations) {
    return double(d) * std::log(y.original_max_position / (rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
  };
  const double low = std::max(std::floor(correction_dim(y.beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(y.beta_slow)), double(d - 1));
  if (low == high) high += 0.001;
  for (int64_t i = 0; i < half; ++i) {
    const float ramp = std::clamp((float(i) - float(low)) / float(high - low), 0.0f, 1.0f);
    const float extrapolation = 1.0f - ramp;
    const float interpolated = 1.0f / (float(y.factor) * pos_freq[size_t(i)]);
    inv[size_t(i)] = interpolated * (1.0f - extrapolation) + inv[size_t(i)] * extrapolation;
  }
  return inv;
}

}  // namespace tetra
