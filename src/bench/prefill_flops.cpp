#include "bench/prefill_flops.h"

#include <algorithm>

#include "model/weight_roles.h"

namespace tetra::bench {

PrefillFlops prefill_flops(const ModelConfig& c, int64_t tokens) {
  PrefillFlops f;
  const double active_share = double(c.n_activated_experts) / double(c.n_routed_experts);
  double per_token = 0;
  for (const auto& e : expected_roles(c, false)) {
    if (e.kind != RoleKind::linear || e.role == "head") continue;
    const double mul_adds = double(e.shape[0]) * double(e.shape[1]);
    per_token += 2 * mul_adds * (e.role.find(".experts.") != std::string::npos ? active_share : 1.0);
  }
  // The head (or the tied embedding) runs once: the last token's logits.
  f.linear = per_token * double(tokens) + 2.0 * double(c.vocab_size) * double(c.dim);

  for (int64_t i = 0; i < c.n_layers; ++i) {
    const int64_t ratio = c.compress_ratios[size_t(i)];
    const bool csa = ratio > 0 && c.attention_kind(i) == AttentionKind::csa;
    for (int64_t t = 0; t < tokens; ++t) {
      const int64_t entries = ratio > 0 ? (t + 1) / ratio : 0;
      const int64_t keys = std::min(t + 1, c.window) + (csa ? std::min(entries, c.index_topk) : entries);
      f.attention += 4.0 * double(c.n_heads) * double(c.head_dim) * double(keys);
      if (csa) f.indexer += 2.0 * double(c.index_n_heads) * double(c.index_head_dim) * double(entries);
    }
  }
  return f;
}

}  // namespace tetra::bench
