#include "model/weight_roles.h"

namespace tetra {

namespace {

void add_block(std::vector<ExpectedRole>& out, const ModelConfig& c, const std::string& p, int64_t ratio, bool hash) {
  using K = RoleKind;
  const int64_t mix = (2 + c.hc_mult) * c.hc_mult;
  for (const char* sub : {"attn", "ffn"}) {
    out.push_back({K::param, p + ".hc_" + sub + "_fn", {mix, c.hc_mult * c.dim}});
    out.push_back({K::param, p + ".hc_" + sub + "_base", {mix}});
    out.push_back({K::param, p + ".hc_" + sub + "_scale", {3}});
  }
  out.push_back({K::param, p + ".attn_norm.weight", {c.dim}});
  out.push_back({K::param, p + ".ffn_norm.weight", {c.dim}});
  const std::string a = p + ".attn.";
  out.push_back({K::param, a + "attn_sink", {c.n_heads}});
  out.push_back({K::param, a + "q_norm.weight", {c.q_lora_rank}});
  out.push_back({K::param, a + "kv_norm.weight", {c.head_dim}});
  out.push_back({K::linear, a + "wq_a", {c.q_lora_rank, c.dim}});
  out.push_back({K::linear, a + "wq_b", {c.n_heads * c.head_dim, c.q_lora_rank}});
  out.push_back({K::linear, a + "wkv", {c.head_dim, c.dim}});
  out.push_back({K::linear, a + "wo_a", {c.o_groups * c.o_lora_rank, c.n_heads * c.head_dim / c.o_groups}});
  out.push_back({K::linear, a + "wo_b", {c.dim, c.o_groups * c.o_lora_rank}});
  auto compressor = [&](const std::string& q, int64_t width, int64_t head, int64_t r) {
    out.push_back({K::linear, q + "wkv", {width, c.dim}});
    out.push_back({K::linear, q + "wgate", {width, c.dim}});
    out.push_back({K::param, q + "ape", {r, width}});
    out.push_back({K::param, q + "norm.weight", {head}});
  };
  if (ratio > 0) {
    const bool overlap = ratio == 4;
    compressor(a + "compressor.", (overlap ? 2 : 1) * c.head_dim, c.head_dim, ratio);
    if (overlap) {
      out.push_back({K::linear, a + "indexer.wq_b", {c.index_n_heads * c.index_head_dim, c.q_lora_rank}});
      out.push_back({K::linear, a + "indexer.weights_proj", {c.index_n_heads, c.dim}});
      compressor(a + "indexer.compressor.", 2 * c.index_head_dim, c.index_head_dim, ratio);
    }
  }
  const std::string f = p + ".ffn.";
  out.push_back({K::linear, f + "gate", {c.n_routed_experts, c.dim}});
  if (hash) out.push_back({K::index, f + "gate.tid2eid", {c.vocab_size, c.n_activated_experts}});
  out.push_back({K::param, f + "gate.bias", {c.n_routed_experts}, /*optional=*/hash});
  for (int64_t e = 0; e < c.n_routed_experts; ++e) {
    const std::string x = f + "experts." + std::to_string(e) + ".";
    out.push_back({K::linear, x + "w1", {c.moe_inter_dim, c.dim}});
    out.push_back({K::linear, x + "w2", {c.dim, c.moe_inter_dim}});
    out.push_back({K::linear, x + "w3", {c.moe_inter_dim, c.dim}});
  }
  if (c.n_shared_experts > 0) {
    const int64_t inter = c.n_shared_experts * c.moe_inter_dim;
    out.push_back({K::linear, f + "shared_experts.w1", {inter, c.dim}});
    out.push_back({K::linear, f + "shared_experts.w2", {c.dim, inter}});
    out.push_back({K::linear, f + "shared_experts.w3", {inter, c.dim}});
  }
}

void add_head(std::vector<ExpectedRole>& out, const ModelConfig& c, const std::string& p) {
  using K = RoleKind;
  out.push_back({K::param, p + "hc_head_fn", {c.hc_mult, c.hc_mult * c.dim}});
  out.push_back({K::param, p + "hc_head_base", {c.hc_mult}});
  out.push_back({K::param, p + "hc_head_scale", {1}});
  out.push_back({K::param, p + "norm.weight", {c.dim}});
}

}  // namespace

std::vector<ExpectedRole> expected_roles(const ModelConfig& c, bool with_mtp) {
  using K = RoleKind;
  std::vector<ExpectedRole> out;
  out.push_back({K::param, "embed.weight", {c.vocab_size, c.dim}});
  for (int64_t i = 0; i < c.n_layers; ++i)
    add_block(out, c, "layers." + std::to_string(i), c.compress_ratios[size_t(i)], c.hash_routed[size_t(i)]);
  add_head(out, c, "");
  out.push_back({K::linear, "head", {c.vocab_size, c.dim}, c.tie_word_embeddings});
  if (with_mtp) {
    for (int64_t k = 0; k < c.n_mtp_layers; ++k) {
      const std::string p = "mtp." + std::to_string(k);
      add_block(out, c, p, 0, false);
      out.push_back({K::linear, p + ".e_proj", {c.dim, c.dim}});
      out.push_back({K::linear, p + ".h_proj", {c.dim, c.dim}});
      out.push_back({K::param, p + ".enorm.weight", {c.dim}});
      out.push_back({K::param, p + ".hnorm.weight", {c.dim}});
      add_head(out, c, p + ".");
    }
  }
  return out;
}

}  // namespace tetra
