#include "bench/synthetic_state.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "bench/random_fill.h"
#include "core/error.h"

namespace tetra::bench {
namespace {

// Every row width the state uses: KV entries, compressor inputs (doubled with overlap) and
// their halves, indexer keys.
int64_t width_multiple(const ModelConfig& c) {
  return std::lcm(2 * c.head_dim, 2 * c.index_head_dim);
}

}  // namespace

RowPool::RowPool(Backend& backend, const ModelConfig& c, int64_t context, uint64_t seed) : backend_(backend) {
  int64_t most = std::min(context, c.window) * c.head_dim;
  for (int64_t i = 0; i < c.n_layers; ++i)
    if (const int64_t ratio = c.compress_ratios[size_t(i)]; ratio > 0)
      most = std::max({most, context / ratio * c.head_dim, ratio * 2 * c.head_dim});
  const int64_t unit = width_multiple(c);
  const int64_t n = std::max<int64_t>(1, (most + unit - 1) / unit) * unit;
  std::vector<float> values(static_cast<size_t>(n));
  parallel_fill(seed, n, [&](SplitMix64& r, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) values[size_t(i)] = 1.7320508f * r.symmetric();  // unit variance
  });
  pool_ = backend_.upload(values, {n});
}

Tensor RowPool::rows(int64_t n, int64_t width) const {
  if (pool_.numel() % width || n * width > pool_.numel())
    runtime_error("synthetic state: the row pool has no ", n, " rows of ", width, " values");
  return backend_.slice_rows(pool_.view({pool_.numel() / width, width}), 0, n);
}

void fill_synthetic_state(Backend& be, const ModelConfig& c, CacheTypes caches, int64_t context, const RowPool& pool,
                          SequenceState& s) {
  s.length = context;
  for (int64_t i = 0; i < c.n_layers; ++i) {
    LayerState& layer = s.layers[size_t(i)];
    if (const int64_t keep = std::min(context, c.window - 1); keep > 0)
      layer.recent_kv = be.encode_kv(pool.rows(keep, c.head_dim), caches.kv, c.rope_dim);
    const int64_t ratio = c.compress_ratios[size_t(i)];
    if (ratio == 0) continue;
    const bool csa = c.attention_kind(i) == AttentionKind::csa;  // overlapping windows and an indexer
    const int64_t entries = context / ratio, pending = context % ratio;
    auto compressor = [&](CompressorState& cs, int64_t head) {
      const int64_t width = csa ? 2 * head : head;
      cs.windows = entries;
      if (pending) {
        cs.pending_kv = pool.rows(pending, width);
        cs.pending_gate = pool.rows(pending, width);
      }
      if (csa && entries) {
        cs.previous_kv = pool.rows(ratio, head);
        cs.previous_gate = pool.rows(ratio, head);
      }
    };
    compressor(layer.compressor, c.head_dim);
    if (entries) layer.compressed = be.encode_kv(pool.rows(entries, c.head_dim), caches.kv, c.rope_dim);
    if (!csa) continue;
    compressor(layer.indexer, c.index_head_dim);
    if (entries) layer.indexer_keys = be.encode_indexer(pool.rows(entries, c.index_head_dim), caches.indexer);
  }
}

}  // namespace tetra::bench
