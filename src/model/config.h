#pragma once
// ModelConfig: one validated description of a DeepSeek-V4 model, read from any of the three
// config.json shapes (transformers 5, the repo-root legacy form, NVIDIA ModelOpt).
#include <cstdint>
#include <string>
#include <vector>

namespace tetra {

enum class ScoringFunc { sqrtsoftplus, softmax, sigmoid };
enum class ConfigForm { transformers, legacy };
enum class AttentionKind { sliding, csa, hca };  // ratio 0, ratio 4 (overlap + indexer), other ratios

struct YarnScaling {
  bool enabled = false;
  double factor = 1;
  double original_max_position = 0;
  double beta_fast = 32;
  double beta_slow = 1;
};

struct QuantizationInfo {
  std::string method;     // "" (none), "fp8" (official), "modelopt"
  std::string quant_algo;  // ModelOpt: NVFP4, MIXED_PRECISION, FP8
  std::string expert_dtype;  // legacy field, e.g. "fp4"
};

struct ModelConfig {
  ConfigForm form = ConfigForm::legacy;
  int64_t vocab_size = 0;
  int64_t dim = 0;  // hidden_size
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t head_dim = 0;
  int64_t rope_dim = 0;  // last rope_dim dims of each head carry RoPE
  int64_t q_lora_rank = 0;
  int64_t o_groups = 0;
  int64_t o_lora_rank = 0;
  int64_t n_routed_experts = 0;
  int64_t n_activated_experts = 0;
  int64_t n_shared_experts = 0;
  int64_t moe_inter_dim = 0;
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;
  int64_t window = 0;  // sliding_window
  int64_t hc_mult = 4;
  int64_t hc_sinkhorn_iters = 20;
  double hc_eps = 1e-6;
  double norm_eps = 1e-6;
  ScoringFunc scoring = ScoringFunc::sqrtsoftplus;
  bool norm_topk_prob = true;
  double route_scale = 1.0;  // routed_scaling_factor
  double swiglu_limit = 0;   // 0 = no clamp
  double rope_theta = 10000;
  double compress_rope_theta = 160000;
  YarnScaling yarn;  // applies to compressed layers only
  int64_t max_position_embeddings = 0;
  std::vector<int64_t> compress_ratios;  // per main layer
  std::vector<bool> hash_routed;         // per main layer
  int64_t n_mtp_layers = 0;
  int64_t bos_token_id = -1;
  int64_t eos_token_id = -1;
  bool tie_word_embeddings = false;
  QuantizationInfo quant;

  AttentionKind attention_kind(int64_t layer) const;
  int64_t n_hash_layers() const;
  std::string summary() const;  // a few human-readable lines
};

// Reads DIR/config.json (and DIR/hf_quant_config.json when present). Throws a model Error
// naming the file and field on anything missing, mistyped or inconsistent.
ModelConfig load_model_config(const std::string& dir);
ModelConfig parse_model_config(const std::string& json_text, const std::string& origin);

}  // namespace tetra
