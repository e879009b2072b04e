#include "runtime/cache_blocks.h"


#include <algorithm>

#include "core/error.h"

namespace tetra {

CacheGeometry::CacheGeometry(const ModelConfig& c, KvCacheDtype kv, IndexerCacheDtype indexer, bool with_mtp)
    : layout_(c, kv, indexer, c.n_layers + (with_mtp ? c.n_mtp_layers : 0)),
      layers_(c.n_layers + (with_mtp ? c.n_mtp_layers : 0)) {}

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
