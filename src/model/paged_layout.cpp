#include "model/paged_layout.h"

#include <algorithm>

namespace tetra {

int64_t compressor_width(const ModelConfig& c, int64_t ratio, bool indexer) {
  const int64_t d = indexer ? c.index_head_dim : c.head_dim;
  return ratio == 4 ? 2 * d : d;
}

PagedLayout::PagedLayout(const ModelConfig& c, KvCacheDtype kv, IndexerCacheDtype indexer, int64_t layers) {
  const int64_t kv_row = kv_entry_bytes(c, kv);
  auto add = [&](int64_t layer, StreamKind kind, int64_t row_bytes, int64_t fixed_rows, int64_t ratio) {
    by_layer_[size_t(layer)][size_t(kind)] = int64_t(streams_.size());
    streams_.push_back({layer, kind, row_bytes, 0, fixed_rows, ratio});
  };
  by_layer_.assign(size_t(layers), std::vector<int64_t>(5, -1));
  for (int64_t l = 0; l < layers; ++l) {
    add(l, StreamKind::window, kv_row, c.window, 0);
    const int64_t ratio = l < c.n_layers ? c.compress_ratios[size_t(l)] : 0;
    if (ratio == 0) continue;
    const int64_t ring = ratio == 4 ? 2 * ratio : ratio;  // with overlap the previous window too
    add(l, StreamKind::compressed, kv_row, 0, ratio);
    add(l, StreamKind::compressor_pending, 2 * 4 * compressor_width(c, ratio, false), ring, ratio);
    if (ratio == 4) {
      add(l, StreamKind::indexer_keys, indexer_entry_bytes(c, indexer), 0, ratio);
      add(l, StreamKind::indexer_pending, 2 * 4 * compressor_width(c, ratio, true), ring, ratio);
    }
  }
  // 64 KV rows a block (the SPEC's 37376-byte fp8 block for V4), at least one row of every
  // stream, a multiple of 256 bytes so that every block starts aligned.
  int64_t bytes = 64 * kv_row;
  for (const StreamSpec& s : streams_) bytes = std::max(bytes, s.row_bytes);
  block_bytes_ = (bytes + 255) / 256 * 256;
  for (StreamSpec& s : streams_) s.rows_per_block = block_bytes_ / s.row_bytes;
}

int64_t PagedLayout::stream(int64_t layer, StreamKind kind) const {
  if (layer < 0 || layer >= int64_t(by_layer_.size())) return -1;
  return by_layer_[size_t(layer)][size_t(kind)];
}

int64_t PagedLayout::blocks_for(int64_t tokens, int64_t layers) const {
  int64_t n = 0;
  for (const StreamSpec& s : streams_)
    if (s.layer < layers) n += blocks(s, tokens);
  return n;
}

}  // namespace tetra
