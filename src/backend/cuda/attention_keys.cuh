#pragma once
// A query row's key list (Backend::attention), shared by the attention kernels: list index j
// runs over the window positions max(0, t-window+1) .. t (this step's rows from the sequence's
// start, the ring before), then over the compressed entries (the row's picks, -1 none, or every
// finished entry). A key is found in three steps of at most one load each, so that a kernel can
// run the steps a tile apart and no load stalls the work in between: locate (j to a row of its
// source: a step row, a ring row or an entry), block (the pool block holding that row) and
// address.
#include "backend/cuda/paged.cuh"

namespace tetra::cuda {

class KeyList {
 public:
  __device__ KeyList(const AttentionKeys& keys, const StepView& at, int64_t r, int64_t window, int64_t ratio)
      : keys_(keys), row_(r), window_(window), ratio_(ratio), slot_(at.slot[r]), start_(at.start[r]),
        first_(at.first_row[r]) {
    const int64_t t = at.position[r];
    lo_ = t - window + 1 > 0 ? t - window + 1 : 0;
    window_keys_ = t - lo_ + 1;
    const int64_t entries = !keys.has_compressed ? 0 : keys.selected ? keys.k : (t + 1) / ratio;
    total_ = window_keys_ + entries;
  }
  __device__ int64_t total() const { return total_; }

  // Row of key j in its source, -1 for none (j at or past `end`, or an empty pick).
  __device__ int32_t locate(int64_t j, int64_t end) const {
    if (j >= end) return -1;
    if (j < window_keys_) {
      const int64_t pos = lo_ + j;
      return int32_t(pos >= start_ ? first_ + pos - start_ : pos % window_);
    }
    const int64_t e = j - window_keys_;
    return keys_.selected ? keys_.selected[row_ * keys_.k + e] : int32_t(e);
  }
  // The pool block of a located key (unused for step rows).
  __device__ int32_t block(int64_t j, int32_t located) const {
    if (located < 0) return -1;
    switch (source(j)) {
      case Source::step: return 0;
      case Source::ring: return paged_block(keys_.window, slot_, located);
      case Source::entry: return paged_block(keys_.compressed, slot_, located);
    }
    return -1;
  }
  // The stored row of key j, null for none.
  __device__ const uint8_t* address(int64_t j, int32_t located, int32_t block) const {
    if (located < 0) return nullptr;
    switch (source(j)) {
      case Source::step: return keys_.step_kv + located * keys_.step_bytes;
      case Source::ring: return paged_address(keys_.window, block, located);
      case Source::entry: return paged_address(keys_.compressed, block, located);
    }
    return nullptr;
  }
  // The bf16 copy of a located key (AttentionKeys::step_bf16, entry_bf16: rows of copy_bytes),
  // which exists for a step row and for an entry that a row of this step completes; null for a
  // ring row, an entry of an earlier step, a key without one, or none.
  __device__ const uint8_t* copy(int64_t j, int32_t located, int64_t copy_bytes) const {
    if (located < 0) return nullptr;
    switch (source(j)) {
      case Source::step: return keys_.step_bf16 ? keys_.step_bf16 + located * copy_bytes : nullptr;
      case Source::ring: return nullptr;
      case Source::entry: {
        const int64_t completed_at = (int64_t(located) + 1) * ratio_ - 1;
        if (!keys_.entry_bf16 || completed_at < start_) return nullptr;
        return keys_.entry_bf16 + (first_ + completed_at - start_) * copy_bytes;
      }
    }
    return nullptr;
  }
  // Whether copy() has every key of the list: the sequence starts in this step (no ring rows,
  // no entry completed before it) and the step's rows and entries have bf16 copies.
  __device__ bool copies_only() const {
    return start_ == 0 && keys_.step_bf16 && (!keys_.has_compressed || keys_.entry_bf16);
  }
  // All three steps at once.
  __device__ const uint8_t* find(int64_t j) const {
    const int32_t located = locate(j, total_);
    return address(j, located, block(j, located));
  }

 private:
  enum class Source { step, ring, entry };
  __device__ Source source(int64_t j) const {
    return j >= window_keys_ ? Source::entry : lo_ + j >= start_ ? Source::step : Source::ring;
  }

  AttentionKeys keys_;
  int64_t row_, window_, ratio_;
  int32_t slot_;
  int64_t start_, first_, lo_ = 0, window_keys_ = 0, total_ = 0;
};

}  // namespace tetra::cuda
