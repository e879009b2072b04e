#include "bench/decode_floor.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "backend/comm_group.h"
#include "core/error.h"
#include "model/kv_layout.h"

namespace tetra::bench {

double expected_distinct_experts(int64_t experts, int64_t active, int64_t tokens) {
  const double miss = 1.0 - double(active) / double(experts);
  return double(experts) * (1.0 - std::pow(miss, double(tokens)));
}

double decode_kv_bytes(const ModelConfig& c, int64_t context, CacheTypes caches) {
  const double entry = double(kv_entry_bytes(c, caches.kv)), key = double(indexer_entry_bytes(c, caches.indexer));
  double bytes = 0;
  for (int64_t i = 0; i < c.n_layers; ++i) {
    bytes += double(std::min(context, c.window - 1)) * entry;
    const int64_t ratio = c.compress_ratios[size_t(i)];
    if (ratio == 0) continue;
    const int64_t entries = (context + 1) / ratio;
    if (c.attention_kind(i) == AttentionKind::csa)
      bytes += double(entries) * key + double(std::min(entries, c.index_topk)) * entry;
    else
      bytes += double(entries) * entry;
  }
  return bytes;
}

DecodeBytes decode_step_bytes(const ModelConfig& c, const ModelWeights& w, int64_t batch, int64_t context,
                              CacheTypes caches, const std::vector<int64_t>* touched, int ranks) {
  if (touched && int64_t(touched->size()) != c.n_layers)
    runtime_error("decode floor: ", touched->size(), " layers of measured routing for ", c.n_layers, " layers");
  if (ranks < 1) runtime_error("decode floor: ", ranks, " ranks");
  DecodeBytes b;
  const int64_t share = largest_expert_share(c.n_routed_experts, ranks);
  const double expected = expected_distinct_experts(c.n_routed_experts, c.n_activated_experts, batch) *
                          double(share) / double(c.n_routed_experts);
  std::map<std::string, double> routed;  // layer prefix ("layers.N") -> bytes of all its routed experts
  for (const LinearWeight* l : w.linears()) {
    if (const auto at = l->role.find(".ffn.experts."); at != std::string::npos)
      routed[l->role.substr(0, at)] += double(l->bytes());
    else
      b.weights += double(l->bytes());
  }
  double experts_sum = 0;
  for (const auto& [prefix, bytes] : routed) {
    double experts = expected;
    if (touched) {
      const int64_t layer = std::stoll(prefix.substr(prefix.find('.') + 1));
      if (layer < 0 || layer >= c.n_layers) runtime_error("decode floor: no measured routing for ", prefix);
      experts = double((*touched)[size_t(layer)]);
    }
    b.weights += bytes / double(c.n_routed_experts) * experts;
    experts_sum += experts;
  }
  b.experts_per_layer = routed.empty() ? expected : experts_sum / double(routed.size());
  for (const ParamWeight* p : w.params()) {
    const double row = double(p->view.numel() / std::max<int64_t>(p->view.shape.empty() ? 1 : p->view.shape[0], 1));
    if (p->role == "embed.weight" || p->role.ends_with("gate.tid2eid"))
      b.weights += 4.0 * row * double(batch);
    else
      b.weights += 4.0 * double(p->view.numel());
  }
  b.kv = double(batch) * decode_kv_bytes(c, context, caches);
  return b;
}

}  // namespace tetra::bench
