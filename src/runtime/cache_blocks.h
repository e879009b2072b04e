#pragma once
// Per-sequence attention state accounted in fixed-size blocks. A sequence reserves, when it is
// admitted, the blocks its longest possible length needs (prompt + max_tokens), so a running
// sequence can never run out of cache mid-generation; the pool is sized from memory.
#include <cstdint>
#include <mutex>

#include "model/config.h"
#include "model/kv_layout.h"
#include "model/paged_layout.h"

namespace tetra {

// How many bytes a block holds and how many blocks a sequence of n tokens needs: the blocks
// the model's paged cache takes for it (PagedLayout over the main layers, and the MTP block's when
// it drafts; the window rings and the compressors' pending windows are fixed per sequence,
// compressed entries grow with n).
class CacheGeometry {
 public:
  CacheGeometry(const ModelConfig& config, KvCacheDtype kv, IndexerCacheDtype indexer, bool with_mtp = false);

  int64_t blocks_for(int64_t tokens) const { return layout_.blocks_for(tokens, layers_); }
  int64_t block_bytes() const { return layout_.block_bytes(); }

 private:
  PagedLayout layout_;
  int64_t layers_;
};

// A counted pool of blocks, safe to use from several threads.
class CacheBlockPool {
 public:
  explicit CacheBlockPool(int64_t total) : total_(total) {}

  bool try_take(int64_t blocks);  // false (taking nothing) when fewer are free
  void give_back(int64_t blocks);
  int64_t in_use() const;
  int64_t total() const { return total_; }

 private:
  const int64_t total_;
  mutable std::mutex mutex_;
  int64_t in_use_ = 0;
};

// Blocks that fit in `bytes` (at least one).
int64_t blocks_for_memory(const CacheGeometry& geometry, double bytes);

}  // namespace tetra
