// The three name families map to one canonical spelling and back.
#include <gtest/gtest.h>

#include "model/weight_names.h"
#include "model/weight_roles.h"
#include "support/tiny_checkpoint.h"

namespace tetra {
namespace {

TEST(WeightNames, KnownSpellings) {
  const std::pair<const char*, const char*> cases[] = {
      {"model.embed_tokens.weight", "embed.weight"},
      {"lm_head.weight", "head.weight"},
      {"model.hc_head.hc_fn", "hc_head_fn"},
      {"model.layers.3.attn_hc.fn", "layers.3.hc_attn_fn"},
      {"model.layers.3.ffn_hc.scale", "layers.3.hc_ffn_scale"},
      {"model.layers.3.input_layernorm.weight", "layers.3.attn_norm.weight"},
      {"model.layers.3.self_attn.q_a_proj.weight_scale", "layers.3.attn.wq_a.weight_scale"},
      {"model.layers.3.self_attn.sinks", "layers.3.attn.attn_sink"},
      {"model.layers.3.attn.norm.weight", "layers.3.attn.kv_norm.weight"},
      {"model.layers.3.self_attn.compressor.position_bias", "layers.3.attn.compressor.ape"},
      {"model.layers.3.self_attn.compressor.indexer.kv_norm.weight", "layers.3.attn.indexer.compressor.norm.weight"},
      {"model.layers.3.self_attn.compressor.indexer.scorer.weights_proj.weight", "layers.3.attn.indexer.weights_proj.weight"},
      {"model.layers.3.self_attn.compressor.indexer.q_b_proj.weight", "layers.3.attn.indexer.wq_b.weight"},
      {"model.layers.3.mlp.gate.e_score_correction_bias", "layers.3.ffn.gate.bias"},
      {"model.layers.3.mlp.experts.17.down_proj.weight_scale_2", "layers.3.ffn.experts.17.w2.weight_scale_2"},
      {"model.layers.3.mlp.experts.gate_up_proj", "layers.3.ffn.experts.gate_up_proj"},
      {"model.layers.3.mlp.shared_experts.up_proj.weight", "layers.3.ffn.shared_experts.w3.weight"},
      {"layers.3.attn.wq_b.weight_scale_inv", "layers.3.attn.wq_b.scale"},
      {"mtp.0.e_proj.scale", "mtp.0.e_proj.scale"},
      {"layers.0.ffn.gate.tid2eid", "layers.0.ffn.gate.tid2eid"},
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(canonical_tensor_name(in).value_or("<none>"), want) << in;
  EXPECT_FALSE(canonical_tensor_name("layers..x"));
}

TEST(WeightNames, EveryRoleRoundTripsThroughEveryFamily) {
  const ModelConfig c = testing::tiny_config();
  for (const auto& e : expected_roles(c, true)) {
    const std::vector<std::string> names =
        e.kind == RoleKind::linear ? std::vector<std::string>{e.role + ".weight", e.role + ".scale", e.role + ".weight_scale",
                                                              e.role + ".weight_scale_2", e.role + ".input_scale"}
                                   : std::vector<std::string>{e.role};
    for (const auto& n : names)
      for (auto f : {NameFamily::official, NameFamily::hf_save, NameFamily::hf_module}) {
        const std::string spelled = family_tensor_name(n, f);
        EXPECT_EQ(canonical_tensor_name(spelled).value_or("<none>"), n) << spelled;
      }
  }
  EXPECT_EQ(family_tensor_name("layers.1.attn.kv_norm.weight", NameFamily::hf_save), "model.layers.1.attn.norm.weight");
  EXPECT_EQ(family_tensor_name("layers.1.attn.wq_a.weight", NameFamily::hf_module), "model.layers.1.self_attn.q_a_proj.weight");
}

}  // namespace
}  // namespace tetra
