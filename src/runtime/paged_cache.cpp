#include "runtime/paged_cache.h"

#include <algorithm>

#include "core/error.h"

namespace tetra {

PagedCache::PagedCache(std::vector<Backend*> backends, PagedLayout layout)
    : backends_(std::move(backends)),
      layout_(std::move(layout)),
      pools_(backends_.size()),
      tables_(backends_.size()),
      capacity_(layout_.streams().size(), 0),
      offset_(layout_.streams().size(), 0) {
  if (backends_.empty()) runtime_error("a paged cache needs a backend");
}

int32_t PagedCache::acquire_slot() {
  std::lock_guard lock(mutex_);
  if (free_slots_.empty()) relayout(-1, 0);
  const int32_t slot = free_slots_.back();
  free_slots_.pop_back();
  return slot;
}

void PagedCache::release_slot(int32_t slot) {
  std::lock_guard lock(mutex_);
  const size_t streams = layout_.streams().size();
  for (size_t s = 0; s < streams; ++s) {
    int64_t& held = held_[size_t(slot) * streams + s];
    for (int64_t b = 0; b < held; ++b)
      free_blocks_.push_back(host_tables_[size_t(slot * width_ + offset_[s] + b)]);
    held = 0;
  }
  free_slots_.push_back(slot);
}

void PagedCache::reserve(int32_t slot, int64_t stream, int64_t rows) {
  std::lock_guard lock(mutex_);
  const StreamSpec& spec = layout_.streams()[size_t(stream)];
  const int64_t need = (rows + spec.rows_per_block - 1) / spec.rows_per_block;
  const size_t streams = layout_.streams().size();
  int64_t& held = held_[size_t(slot) * streams + size_t(stream)];
  if (need <= held) return;
  if (need > capacity_[size_t(stream)]) relayout(stream, need);
  if (const int64_t missing = need - held - int64_t(free_blocks_.size()); missing > 0)
    grow_pool(std::max(pool_blocks_, missing + 16));
  std::vector<int32_t> taken;
  for (int64_t b = held; b < need; ++b) {
    taken.push_back(free_blocks_.back());
    free_blocks_.pop_back();
  }
  const int64_t at = slot * width_ + offset_[size_t(stream)] + held;
  std::copy(taken.begin(), taken.end(), host_tables_.begin() + at);
  for_each_copy([&](size_t i, Backend& be) { be.write_i32(tables_[i], at, taken); });
  held = need;
}

PagedRows PagedCache::rows(int64_t stream, size_t copy) const {
  std::lock_guard lock(mutex_);
  const StreamSpec& s = layout_.streams()[size_t(stream)];
  return {pools_.at(copy), tables_.at(copy), width_, offset_[size_t(stream)], s.rows_per_block, s.row_bytes, layout_.block_bytes(),
          capacity_[size_t(stream)] * s.rows_per_block};
}

uint64_t PagedCache::generation() const {
  std::lock_guard lock(mutex_);
  return generation_;
}

int64_t PagedCache::blocks_in_use() const {
  std::lock_guard lock(mutex_);
  return pool_blocks_ - int64_t(free_blocks_.size());
}

int64_t PagedCache::blocks_held(int32_t slot) const {
  std::lock_guard lock(mutex_);
  const size_t streams = layout_.streams().size();
  int64_t n = 0;
  for (size_t s = 0; s < streams; ++s) n += held_[size_t(slot) * streams + s];
  return n;
}

void PagedCache::zero_blocks(int32_t slot) {
  std::lock_guard lock(mutex_);
  const size_t streams = layout_.streams().size();
  std::vector<int32_t> blocks;
  for (size_t s = 0; s < streams; ++s) {
    const auto first = host_tables_.begin() + slot * width_ + offset_[s];
    blocks.insert(blocks.end(), first, first + held_[size_t(slot) * streams + s]);
  }
  std::sort(blocks.begin(), blocks.end());
  // one copy per run of consecutive blocks, from a zero source of at most kRun blocks
  constexpr int64_t kRun = 1024;
  for_each_copy([&](size_t copy, Backend& be) {
    Tensor zero;
    for (size_t i = 0; i < blocks.size();) {
      size_t j = i + 1;
      while (j < blocks.size() && blocks[j] == blocks[j - 1] + 1 && int64_t(j - i) < kRun) ++j;
      const int64_t count = int64_t(j - i);
      if (zero.empty() || zero.rows() < count)
        zero = be.zeros({std::min<int64_t>(kRun, int64_t(blocks.size())), layout_.block_bytes()}, ElemType::u8);
      be.copy_into(pools_[copy].rows_view(blocks[i], count), zero.rows_view(0, count));
      i = j;
    }
  });
}

void PagedCache::reserve_pool(int64_t blocks) {
  std::lock_guard lock(mutex_);
  if (blocks > pool_blocks_) grow_pool(blocks - pool_blocks_);
}

void PagedCache::release_pool() {
  std::lock_guard lock(mutex_);
  if (int64_t(free_blocks_.size()) != pool_blocks_)
    runtime_error("paged cache: the pool cannot be released while sequences hold ", pool_blocks_ - int64_t(free_blocks_.size()),
                  " of its blocks");
  for_each_copy([&](size_t copy, Backend&) { pools_[copy] = Tensor(); });
  free_blocks_.clear();
  pool_blocks_ = 0;
  ++generation_;
}

void PagedCache::grow_pool(int64_t extra) {
  const int64_t bytes = layout_.block_bytes();
  const bool empty = int64_t(free_blocks_.size()) == pool_blocks_;
  for_each_copy([&](size_t copy, Backend& be) {
    Tensor& pool = pools_[copy];
    if (empty) {
      // Nothing lives in the pool: let it go before taking the larger one, so that the two (and
      // the copy) never need memory at once (a benchmark's next point, a server's first reserve).
      pool = Tensor();
      pool = be.zeros({pool_blocks_ + extra, bytes}, ElemType::u8);
    } else {
      pool = be.concat_rows({pool, be.zeros({extra, bytes}, ElemType::u8)}, {bytes}, ElemType::u8);
    }
  });
  for (int64_t b = pool_blocks_ + extra - 1; b >= pool_blocks_; --b) free_blocks_.push_back(int32_t(b));
  pool_blocks_ += extra;
  ++generation_;
}

void PagedCache::relayout(int64_t stream_needing, int64_t blocks) {
  const size_t streams = layout_.streams().size();
  std::vector<int64_t> capacity = capacity_;
  int64_t slots = slots_;
  if (stream_needing >= 0) {
    capacity[size_t(stream_needing)] = std::max(blocks, 2 * capacity[size_t(stream_needing)]);
  } else {
    slots = std::max<int64_t>(4, 2 * slots_);
  }
  std::vector<int64_t> offset(streams);
  int64_t width = 0;
  for (size_t s = 0; s < streams; ++s) {
    offset[s] = width;
    width += capacity[s];
  }
  std::vector<int32_t> tables(size_t(slots * std::max<int64_t>(width, 1)), -1);
  for (int64_t slot = 0; slot < slots_; ++slot)
    for (size_t s = 0; s < streams; ++s)
      std::copy_n(host_tables_.begin() + slot * width_ + offset_[s], held_[size_t(slot) * streams + s],
                  tables.begin() + slot * width + offset[s]);
  held_.resize(size_t(slots) * streams, 0);
  for (int64_t slot = slots - 1; slot >= slots_; --slot) free_slots_.push_back(int32_t(slot));
  host_tables_ = std::move(tables);
  capacity_ = std::move(capacity);
  offset_ = std::move(offset);
  slots_ = slots;
  width_ = width;
  upload_tables();
}

void PagedCache::upload_tables() {
  for_each_copy([&](size_t copy, Backend& be) {
    tables_[copy] = be.upload_i32(host_tables_, {slots_, std::max<int64_t>(width_, 1)});
  });
  ++generation_;
}

}  // namespace tetra
