#pragma once
// The per-sequence attention state of every sequence, in fixed-size blocks of one pool in the
// backend's memory (PagedLayout says which rows go where). Each sequence owns a slot: a row of
// the block tables, also in the backend's memory, so that kernels find its rows on their own.
// Pool and tables grow when needed (by doubling); `generation` changes whenever they move, so
// that recorded graphs holding their addresses can be recorded anew. A cache may keep one copy
// of pool and tables on each of several backends (the ranks of expert parallelism, which all
// run attention): one allocation of blocks, the same tables, a pool per backend.
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "model/paged_layout.h"

namespace tetra {

class PagedCache {
 public:
  PagedCache(Backend& backend, PagedLayout layout) : PagedCache(std::vector<Backend*>{&backend}, std::move(layout)) {}
  PagedCache(std::vector<Backend*> backends, PagedLayout layout);
  PagedCache(const PagedCache&) = delete;
  PagedCache& operator=(const PagedCache&) = delete;

  const PagedLayout& layout() const { return layout_; }
  int32_t acquire_slot();
  void release_slot(int32_t slot);  // its blocks become free
  // Gives the slot's stream room for `rows` rows.
  void reserve(int32_t slot, int64_t stream, int64_t rows);
  // Takes the pool to at least `blocks` blocks now, so that it need not grow (and copy) later.
  void reserve_pool(int64_t blocks);
  // Gives the pool's memory back to the backend; no slot may hold blocks.
  void release_pool();
  // Zeros every block the slot holds (blocks come back from other sequences as they left them:
  // a sequence sized without running its tokens must not read their rows).
  void zero_blocks(int32_t slot);
  // The stream's rows in backend `copy`'s pool (the constructor's order).
  PagedRows rows(int64_t stream, size_t copy = 0) const;
  uint64_t generation() const;
  int64_t blocks_in_use() const;  // blocks held by slots
  int64_t blocks_held(int32_t slot) const;

 private:
  void grow_pool(int64_t extra);  // adds `extra` free blocks
  void relayout(int64_t stream_needing, int64_t blocks);  // widens one stream's columns or adds slots
  void upload_tables();
  // work(i, backend i) for every copy, with its backend bound (tetra::in_turn).
  template <class Work>
  void for_each_copy(Work work) {
    in_turn(backends_, [&](size_t i) { work(i, *backends_[i]); });
  }

  std::vector<Backend*> backends_;
  PagedLayout layout_;
  mutable std::mutex mutex_;
  std::vector<Tensor> pools_;  // per backend: u8 [blocks, block_bytes]
  int64_t pool_blocks_ = 0;
  std::vector<int32_t> free_blocks_;
  std::vector<Tensor> tables_;  // per backend: i32 [slots, width]
  int64_t slots_ = 0, width_ = 0;
  std::vector<int64_t> capacity_, offset_;  // per stream: table columns
  std::vector<int32_t> host_tables_;        // the tables as the host wrote them
  std::vector<int64_t> held_;               // [slot][stream] blocks
  std::vector<int32_t> free_slots_;
  uint64_t generation_ = 0;
};

}  // namespace tetra
