#include "model/config_writer.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tetra {
using nlohmann::json;

std::string model_config_json(const ModelConfig& c, ConfigForm form) {
  json j = {{"architectures", {"DeepseekV4ForCausalLM"}},
            {"model_type", "deepseek_v4"},
            {"vocab_size", c.vocab_size},
            {"hidden_size", c.dim},
            {"num_hidden_layers", c.n_layers},
            {"num_attention_heads", c.n_heads},
            {"num_key_value_heads", 1},
            {"head_dim", c.head_dim},
            {"q_lora_rank", c.q_lora_rank},
            {"o_groups", c.o_groups},
            {"o_lora_rank", c.o_lora_rank},
            {"n_routed_experts", c.n_routed_experts},
            {"num_experts_per_tok", c.n_activated_experts},
            {"n_shared_experts", c.n_shared_experts},
            {"moe_intermediate_size", c.moe_inter_dim},
            {"index_n_heads", c.index_n_heads},
            {"index_head_dim", c.index_head_dim},
            {"index_topk", c.index_topk},
            {"sliding_window", c.window},
            {"hc_mult", c.hc_mult},
            {"hc_sinkhorn_iters", c.hc_sinkhorn_iters},
            {"hc_eps", c.hc_eps},
            {"rms_norm_eps", c.norm_eps},
            {"scoring_func", c.scoring == ScoringFunc::sqrtsoftplus ? "sqrtsoftplus" : c.scoring == ScoringFunc::softmax ? "softmax" : "sigmoid"},
            {"norm_topk_prob", c.norm_topk_prob},
            {"routed_scaling_factor", c.route_scale},
            {"swiglu_limit", c.swiglu_limit},
            {"rope_theta", c.rope_theta},
            {"compress_rope_theta", c.compress_rope_theta},
            {"max_position_embeddings", c.max_position_embeddings},
            {"num_nextn_predict_layers", c.n_mtp_layers},
            {"bos_token_id", c.bos_token_id},
            {"eos_token_id", c.eos_token_id},
            {"hidden_act", "silu"}};
  // Without YaRN the compressed layers' rope is the plain one (a yarn block of the defaults
  // would turn YaRN on, with an original length of 0 that the reader refuses).
  const json yarn = c.yarn.enabled ? json{{"rope_type", "yarn"},
                                          {"factor", c.yarn.factor},
                                          {"original_max_position_embeddings", c.yarn.original_max_position},
                                          {"beta_fast", c.yarn.beta_fast},
                                          {"beta_slow", c.yarn.beta_slow}}
                                   : json{{"rope_type", "default"}};
  if (form == ConfigForm::legacy) {
    std::vector<int64_t> ratios = c.compress_ratios;
    for (int64_t k = 0; k < c.n_mtp_layers; ++k) ratios.push_back(0);
    j["compress_ratios"] = ratios;
    j["num_hash_layers"] = c.n_hash_layers();
    j["qk_rope_head_dim"] = c.rope_dim;
    if (c.yarn.enabled) j["rope_scaling"] = yarn;
  } else {
    std::vector<std::string> types, mlp;
    for (int64_t i = 0; i < c.n_layers; ++i) {
      const auto k = c.attention_kind(i);
      types.push_back(k == AttentionKind::sliding ? "sliding_attention"
                      : k == AttentionKind::csa   ? "compressed_sparse_attention"
                                                  : "heavily_compressed_attention");
      mlp.push_back(c.hash_routed[size_t(i)] ? "hash_moe" : "moe");
    }
    j["layer_types"] = types;
    j["mlp_layer_types"] = mlp;
    // One ratio per kind: CSA is 4; the HCA ratio is whatever the HCA layers use, and this form
    // has room for only one.
    int64_t hca = 0;
    for (int64_t r : c.compress_ratios) {
      if (r == 0 || r == 4) continue;
      if (hca && r != hca)
        runtime_error("config.json: the transformers form holds one HCA compression ratio; this model has ", hca,
                      " and ", r, " (write the legacy form)");
      hca = r;
    }
    if (!hca) hca = 128;
    j["compress_rates"] = {{"compressed_sparse_attention", 4}, {"heavily_compressed_attention", hca}};
    j["partial_rotary_factor"] = double(c.rope_dim) / double(c.head_dim);
    json compress = yarn;
    compress["rope_theta"] = c.compress_rope_theta;
    j["rope_parameters"] = {{"main", {{"rope_type", "default"}, {"rope_theta", c.rope_theta}}}, {"compress", compress}};
  }
  if (c.quant.method == "fp8")
    j["quantization_config"] = {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"},
                                {"scale_fmt", "ue8m0"}, {"weight_block_size", {128, 128}}};
  else if (c.quant.method == "modelopt")
    j["quantization_config"] = {{"quant_method", "modelopt"}, {"quant_algo", c.quant.quant_algo}};
  if (!c.quant.expert_dtype.empty()) j["expert_dtype"] = c.quant.expert_dtype;
  return j.dump(2);
}

}  // namespace tetra
