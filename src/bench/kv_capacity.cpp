#include "bench/kv_capacity.h"

#include "backend/comm_group.h"
#include "model/kv_layout.h"

namespace tetra::bench {

uint64_t kv_bytes_per_sequence(const ModelConfig& c, int64_t tokens, CacheTypes caches) {
  const uint64_t entry = uint64_t(kv_entry_bytes(c, caches.kv)), key = uint64_t(indexer_entry_bytes(c, caches.indexer));
  uint64_t bytes = 0;
  for (int64_t i = 0; i < c.n_layers; ++i) {
    bytes += uint64_t(layer_kv_bytes(c, i, caches.kv, caches.indexer).per_sequence);
    const int64_t ratio = c.compress_ratios[size_t(i)];
    if (ratio == 0) continue;
    const uint64_t entries = uint64_t(tokens / ratio);
    bytes += entries * (entry + (c.attention_kind(i) == AttentionKind::csa ? key : 0));
  }
  return bytes;
}

uint64_t largest_rank_weight_bytes(int ranks, uint64_t shared_bytes, uint64_t expert_bytes, int64_t experts) {
  if (ranks <= 1 || experts < 1) return shared_bytes + expert_bytes;
  return shared_bytes + expert_bytes / uint64_t(experts) * uint64_t(largest_expert_share(experts, ranks));
}

int64_t sequences_that_fit(uint64_t device_bytes, int ranks, uint64_t shared_bytes, uint64_t expert_bytes, int64_t experts,
                           uint64_t per_sequence) {
  if (ranks < 1 || experts < 1 || per_sequence == 0) return 0;
  const uint64_t weights = largest_rank_weight_bytes(ranks, shared_bytes, expert_bytes, experts);
  if (device_bytes <= weights) return 0;
  return int64_t((device_bytes - weights) / per_sequence);
}

}  // namespace tetra::bench
