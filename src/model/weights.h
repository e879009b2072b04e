#pragma once
// ModelWeights: every tensor of a checkpoint resolved to its role (canonical name), each
// linear layer's storage format detected from its tensors and checked against the config.
// Views point into the memory-mapped files; nothing is read until a value is used.
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"
#include "model/config.h"

namespace tetra {

enum class WeightFormat {
  dense,       // bf16 / f16 / f32
  fp8_block,   // e4m3 + one scale (ue8m0 or f32) per 128x128 block (official)
  fp8_tensor,  // e4m3 + one f32 scale per tensor (ModelOpt FP8)
  mxfp4,       // e2m1 + one ue8m0 scale per 32 inputs (official experts)
  nvfp4,       // e2m1 + e4m3 scale per 16 inputs + f32 global scale (ModelOpt)
};
const char* weight_format_name(WeightFormat f);

struct LinearWeight {
  std::string role;  // canonical module name, e.g. "layers.3.attn.wq_a"
  WeightFormat format = WeightFormat::dense;
  int64_t out = 0, in = 0;
  TensorView weight;  // for fused experts: this expert's rows of the fused tensor
  TensorView scale;   // block scales (fp8_block, mxfp4), e4m3 scales (nvfp4), scalar (fp8_tensor)
  float global_scale = 1;             // nvfp4 weight_scale_2
  std::optional<float> input_scale;   // ModelOpt calibration value: reported, never used
  std::vector<std::string> sources;   // checkpoint tensor names
  uint64_t bytes() const { return weight.nbytes + scale.nbytes; }
};

struct ParamWeight {
  std::string role;  // canonical name, e.g. "layers.3.hc_attn_fn"
  TensorView view;
  std::string source;
};

class ModelWeights {
 public:
  // Resolves every tensor of `store`; throws a model Error listing each missing, unknown,
  // duplicated or mis-shaped tensor by name.
  ModelWeights(const ModelConfig& config, const TensorStore& store);
  // Weights already resolved to their roles (synthetic models, benchmarks): exactly the roles
  // expected_roles() lists for `config` (optional ones may be absent), each of its shape;
  // throws a model Error listing every missing, unknown or mis-shaped role.
  ModelWeights(const ModelConfig& config, std::vector<LinearWeight> linears, std::vector<ParamWeight> params,
               bool with_mtp);

  const LinearWeight& linear(const std::string& role) const;
  const ParamWeight& param(const std::string& role) const;
  bool has_linear(const std::string& role) const { return linears_.count(role) > 0; }
  bool has_param(const std::string& role) const { return params_.count(role) > 0; }
  bool has_mtp() const { return has_mtp_; }

  // In a stable order (the order of the expected-tensor list).
  const std::vector<const LinearWeight*>& linears() const { return linear_order_; }
  const std::vector<const ParamWeight*>& params() const { return param_order_; }
  uint64_t total_bytes() const;

 private:
  std::unordered_map<std::string, LinearWeight> linears_;
  std::unordered_map<std::string, ParamWeight> params_;
  std::vector<const LinearWeight*> linear_order_;
  std::vector<const ParamWeight*> param_order_;
  bool has_mtp_ = false;
};

// Exact f32 value of every element, row-major [out, in].
std::vector<float> dequantize(const LinearWeight& w);
// Exact f32 value of a dense float or integer tensor.
std::vector<float> to_f32(const TensorView& t);

}  // namespace tetra
