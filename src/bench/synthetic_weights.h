#pragma once
// Random, well-scaled weights of any geometry in the formats of the published checkpoints,
// without a file: every tensor of one (shape, format) views one shared host buffer, so a
// 70 GB model needs a few GB of host memory while each tensor still becomes its own device
// upload through Backend::load_linear / load_param (real device memory, real traffic).
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "model/config.h"
#include "model/weights.h"

namespace tetra::bench {

enum class SyntheticFormat {
  nvfp4,      // NVIDIA ModelOpt NVFP4: NVFP4 routed experts, per-tensor FP8 attention and shared expert
  mxfp4_fp8,  // official release: MXFP4 routed experts, FP8 128x128 blocks (ue8m0 scales) elsewhere
};
SyntheticFormat parse_synthetic_format(const std::string& s);  // usage error otherwise
const char* synthetic_format_name(SyntheticFormat f);

// The format a linear layer has in that kind of checkpoint. Router, head, compressors and the
// indexer's weights_proj are bf16 in both (as published).
WeightFormat synthetic_weight_format(const std::string& role, SyntheticFormat f);

// Bytes the backend keeps for a linear layer of that format (checkpoint bytes: codes + scales).
uint64_t linear_bytes(WeightFormat f, int64_t out, int64_t in);

// Device bytes of the whole model in that format, from the shapes alone: linear layers at
// their checkpoint bytes, every other tensor as the f32 (i32) copy the backends keep.
uint64_t synthetic_model_bytes(const ModelConfig& c, SyntheticFormat f);
// The routed experts' share of it (what expert parallelism splits over ranks).
uint64_t synthetic_routed_expert_bytes(const ModelConfig& c, SyntheticFormat f);

class SyntheticWeights {
 public:
  SyntheticWeights(const ModelConfig& config, SyntheticFormat format, uint64_t seed);
  SyntheticWeights(const SyntheticWeights&) = delete;
  SyntheticWeights& operator=(const SyntheticWeights&) = delete;

  const ModelWeights& weights() const { return *weights_; }
  uint64_t host_bytes() const;  // the shared buffers

 private:
  // One buffer per (kind, dtype, shape, spread); views of it serve every tensor of that key.
  // `spread`: the standard deviation of the values that quantized codes are drawn from.
  const std::vector<std::byte>& buffer(const std::string& kind, DType dtype, const Shape& shape, float spread = 0);
  LinearWeight make_linear(const std::string& role, WeightFormat f, int64_t out, int64_t in);
  ParamWeight make_param(const std::string& role, const Shape& shape, bool index);

  const ModelConfig config_;
  uint64_t seed_;
  std::map<std::tuple<std::string, DType, Shape, float>, std::vector<std::byte>> buffers_;
  std::unique_ptr<ModelWeights> weights_;
};

}  // namespace tetra::bench
