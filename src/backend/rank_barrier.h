#pragma once
// A barrier for the threads of a CommGroup's ranks that an abort breaks: a rank that failed
// before reaching it must not leave the others waiting forever.
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "backend/comm_group.h"
#include "core/error.h"

namespace tetra {

class RankBarrier {
 public:
  explicit RankBarrier(int ranks) : ranks_(ranks) {
    if (ranks < 1) runtime_error("a communication group needs at least one rank, got ", ranks);
  }
  int ranks() const { return ranks_; }

  // Returns once every rank has arrived; throws CommAborted after abort() (until recover()).
  void arrive_and_wait() {
    std::unique_lock lock(mutex_);
    if (aborted_) throw CommAborted();
    const uint64_t phase = phase_;
    if (++arrived_ == ranks_) {
      arrived_ = 0;
      ++phase_;
      changed_.notify_all();
      return;
    }
    changed_.wait(lock, [&] { return phase_ != phase || aborted_; });
    if (phase_ == phase) throw CommAborted();
  }
  void abort() {
    std::lock_guard lock(mutex_);
    aborted_ = true;
    changed_.notify_all();
  }
  // Every rank has returned: the barrier starts afresh.
  void recover() {
    std::lock_guard lock(mutex_);
    aborted_ = false;
    arrived_ = 0;
  }

 private:
  const int ranks_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  uint64_t phase_ = 0;
  bool aborted_ = false;
};

}  // namespace tetra
