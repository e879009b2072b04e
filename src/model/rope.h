#pragma once
// RoPE frequencies θ_i of one layer kind, in f32 exactly as transformers computes them:
// plain `base^(-2i/d)` for sliding-only layers, YaRN-blended for compressed layers (and
// their compressors and indexers). cos/sin are never scaled by an mscale.
#include <vector>

#include "model/config.h"

namespace tetra {

std::vector<float> rope_inv_freq(const ModelConfig& c, bool compressed_layer);

}  // namespace tetra
