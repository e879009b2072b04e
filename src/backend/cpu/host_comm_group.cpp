#include "backend/cpu/host_comm_group.h"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "core/error.h"

namespace tetra {
namespace {

class HostCommGroup final : public CommGroup {
 public:
  explicit HostCommGroup(int ranks) : ranks_(ranks), posted_(size_t(ranks)) {
    if (ranks < 1) runtime_error("a communication group needs at least one rank, got ", ranks);
  }

  int ranks() const override { return ranks_; }

  void all_reduce_sum(int rank, Tensor& t) override {
    if (rank < 0 || rank >= ranks_) runtime_error("all_reduce_sum: rank ", rank, " of a group of ", ranks_);
    if (t.type() != ElemType::f32) runtime_error("all_reduce_sum: rank ", rank, " passed a tensor that is not f32");
    posted_[size_t(rank)] = t;
    wait_for_every_rank();  // every rank's tensor is posted
    for (int r = 0; r < ranks_; ++r)
      if (posted_[size_t(r)].numel() != t.numel()) {
        abort();
        runtime_error("all_reduce_sum: rank ", r, " passed ", posted_[size_t(r)].numel(), " values, rank ", rank, " ",
                      t.numel());
      }
    const int64_t n = t.numel();
    std::vector<float> sum(posted_[0].data<float>(), posted_[0].data<float>() + n);
    for (int r = 1; r < ranks_; ++r) {
      const float* x = posted_[size_t(r)].data<float>();
      for (int64_t i = 0; i < n; ++i) sum[size_t(i)] += x[i];
    }
    wait_for_every_rank();  // every rank has read the others' tensors: each may overwrite its own
    std::copy(sum.begin(), sum.end(), t.data<float>());
    posted_[size_t(rank)] = Tensor();
  }

  void abort() override {
    std::lock_guard lock(mutex_);
    aborted_ = true;
    changed_.notify_all();
  }

  void recover() override {
    std::lock_guard lock(mutex_);
    aborted_ = false;
    arrived_ = 0;
    for (Tensor& t : posted_) t = Tensor();
  }

 private:
  // A barrier that an abort breaks.
  void wait_for_every_rank() {
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

  const int ranks_;
  std::vector<Tensor> posted_;  // each rank's tensor while a reduction runs
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  uint64_t phase_ = 0;
  bool aborted_ = false;
};

}  // namespace

std::unique_ptr<CommGroup> make_host_comm_group(int ranks) { return std::make_unique<HostCommGroup>(ranks); }

}  // namespace tetra
