#pragma once
// One sequence's place in the paged cache (runtime/paged_cache.h): its slot, taken on first use
// and given back (with every block) when the state is destroyed, and its length.
#include <cstdint>
#include <memory>
#include <utility>

#include "runtime/paged_cache.h"

namespace tetra {

class SequenceState {
 public:
  SequenceState() = default;
  explicit SequenceState(std::shared_ptr<PagedCache> cache) : cache_(std::move(cache)) {}
  ~SequenceState() { release(); }
  SequenceState(SequenceState&& o) noexcept
      : length(std::exchange(o.length, 0)), cache_(std::move(o.cache_)), slot_(std::exchange(o.slot_, -1)) {}
  SequenceState& operator=(SequenceState&& o) noexcept {
    if (this != &o) {
      release();
      length = std::exchange(o.length, 0);
      cache_ = std::move(o.cache_);
      slot_ = std::exchange(o.slot_, -1);
    }
    return *this;
  }
  SequenceState(const SequenceState&) = delete;
  SequenceState& operator=(const SequenceState&) = delete;

  int64_t length = 0;  // tokens processed so far

  PagedCache* cache() const { return cache_.get(); }
  int32_t slot() {
    if (slot_ < 0 && cache_) slot_ = cache_->acquire_slot();
    return slot_;
  }

 private:
  void release() {
    if (slot_ >= 0) cache_->release_slot(slot_);
    slot_ = -1;
  }
  std::shared_ptr<PagedCache> cache_;
  int32_t slot_ = -1;
};

}  // namespace tetra
