#pragma once
// Tensor names: the three spellings of DeepSeek-V4 checkpoints (official, transformers'
// save_pretrained, transformers in-memory / ModelOpt) mapped to one canonical spelling, the
// official one, which the rest of tetra uses as the role name.
#include <optional>
#include <string>

namespace tetra {

// Canonical (official) spelling of a checkpoint tensor name, e.g.
//   model.layers.3.self_attn.q_a_proj.weight_scale -> layers.3.attn.wq_a.weight_scale
//   model.layers.0.mlp.gate.e_score_correction_bias -> layers.0.ffn.gate.bias
//   *.weight_scale_inv -> *.scale
// Fused transformers experts become layers.N.ffn.experts.gate_up_proj / .down_proj.
// Returns nullopt for a name no family uses.
std::optional<std::string> canonical_tensor_name(const std::string& name);

}  // namespace tetra

namespace tetra {

enum class NameFamily {
  official,         // inference/ and the HF repo files: layers.N.attn.wq_a.weight
  hf_save,          // transformers 5 save_pretrained: model.layers.N.attn.wq_a.weight, attn.norm
  hf_module,        // transformers in-memory / ModelOpt export: model.layers.N.self_attn.q_a_proj.weight
};

// The spelling of canonical tensor name `canonical` (as canonical_tensor_name returns) in a
// family. canonical_tensor_name(family_tensor_name(c, f)) == c for every family.
std::string family_tensor_name(const std::string& canonical, NameFamily family);

}  // namespace tetra
