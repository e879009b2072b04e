#pragma once
// How one sequence's attention state packs into fixed-size blocks: per layer a few kinds of
// rows ("streams"), each stream filling whole blocks of its own rows. The paged cache
// (runtime/paged_cache.h) allocates by it and the scheduler accounts by it, so both count the
// same blocks.
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/kv_layout.h"

namespace tetra {

enum class StreamKind {
  window,             // the sliding-window ring: encoded KV of the last `window` positions
  compressed,         // encoded compressed KV entries, one per finished window
  compressor_pending, // the compressor's unfinished windows: f32 [kv | gate + ape] per position
  indexer_keys,       // encoded indexer keys (CSA), one per finished window
  indexer_pending,    // the indexer compressor's unfinished windows
};

struct StreamSpec {
  int64_t layer = 0;
  StreamKind kind = StreamKind::window;
  int64_t row_bytes = 0;
  int64_t rows_per_block = 0;
  int64_t fixed_rows = 0;  // rows of a ring (window, pending); 0: one row per `ratio` tokens
  int64_t ratio = 0;       // the layer's compress ratio
};

class PagedLayout {
 public:
  // `layers`: the main layers, then (if counted) the MTP blocks, which have a window only.
  PagedLayout(const ModelConfig& config, KvCacheDtype kv, IndexerCacheDtype indexer, int64_t layers);

  int64_t block_bytes() const { return block_bytes_; }
  const std::vector<StreamSpec>& streams() const { return streams_; }
  // The stream of `kind` in `layer`, or -1 when that layer has none.
  int64_t stream(int64_t layer, StreamKind kind) const;
  int64_t rows(const StreamSpec& s, int64_t tokens) const {
    return s.fixed_rows > 0 ? s.fixed_rows : tokens / s.ratio;
  }
  int64_t blocks(const StreamSpec& s, int64_t tokens) const {
    return (rows(s, tokens) + s.rows_per_block - 1) / s.rows_per_block;
  }
  // Blocks of a sequence of `tokens` tokens over the streams of layers [0, layers).
  int64_t blocks_for(int64_t tokens, int64_t layers) const;

 private:
  int64_t block_bytes_ = 0;
  std::vector<StreamSpec> streams_;
  std::vector<std::vector<int64_t>> by_layer_;  // [layer][kind] -> stream or -1
};

// Width in f32 of one compressor row ([kv | gate]) of a layer with `ratio` (CSA: overlap, two
// halves per channel).
int64_t compressor_width(const ModelConfig& c, int64_t ratio, bool indexer);

}  // namespace tetra
