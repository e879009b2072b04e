#include "runtime/cache_blocks.h"


#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tetra {

CacheGeometry::CacheGeometry(const ModelConfig& c, KvCacheDtype kv, IndexerCacheDtype indexer, int64_t block_tokens)
    : block_tokens_(block_tokens) {
  double per_token = 0;
  int64_t per_sequence = 0;
  for (int64_t layer = 0; layer < c.n_layers; ++layer) {
    const LayerKvBytes b = layer_kv_bytes(c, layer, kv, indexer);
    per_token += b.per_token;
    per_sequence += b.per_sequence;
  }
  // A block holds block_tokens tokens of growing state; a model with only sliding layers has
  // none, and then a block is one window entry's worth of a layer.
  block_bytes_ = std::max<int64_t>(int64_t(std::ceil(per_token * double(block_tokens))), kv_entry_bytes(c, kv));
  fixed_blocks_ = (per_sequence + block_bytes_ - 1) / block_bytes_;
}

int64_t CacheGeometry::blocks_for(int64_t tokens) const {
  return fixed_blocks_ + (tokens + block_tokens_ - 1) / block_tokens_;
}

bool CacheBlockPool::try_take(int64_t blocks) {
  std::lock_guard lock(mutex_);
  if (in_use_ + blocks > total_) return false;
  in_use_ += blocks;
  return true;
}

void CacheBlockPool::give_back(int64_t blocks) {
  std::lock_guard lock(mutex_);
  in_use_ -= blocks;
}

int64_t CacheBlockPool::in_use() const {
  std::lock_guard lock(mutex_);
  return in_use_;
}

int64_t blocks_for_memory(const CacheGeometry& geometry, double bytes) {
  return std::max<int64_t>(1, int64_t(bytes / double(geometry.block_bytes())));
}

}  // namespace tetra
