#pragma once
// What a CommGroup's ranks share while they combine tensors: each rank posts its tensor and waits
// for the others' (RankBarrier), checks they match, and takes its own back when done.
#include <vector>

#include "backend/rank_barrier.h"
#include "backend/tensor.h"
#include "core/error.h"

namespace tetra {

class TensorExchange {
 public:
  explicit TensorExchange(int ranks) : barrier_(ranks), posted_(size_t(ranks)) {}
  int ranks() const { return barrier_.ranks(); }

  // `op` names the caller in errors: a rank outside the group.
  void check_rank(const char* op, int rank) const {
    if (rank < 0 || rank >= ranks()) runtime_error(op, ": rank ", rank, " of a group of ", ranks());
  }
  // Posts rank's f32 tensor t and returns every rank's once all have posted; tensors of other
  // sizes abort the group and fail on every rank.
  const std::vector<Tensor>& post_and_wait(const char* op, int rank, const Tensor& t) {
    check_rank(op, rank);
    if (t.type() != ElemType::f32) runtime_error(op, ": rank ", rank, " passed a tensor that is not f32");
    posted_[size_t(rank)] = t;
    barrier_.arrive_and_wait();
    for (int r = 0; r < ranks(); ++r)
      if (posted_[size_t(r)].numel() != t.numel()) {
        abort();
        runtime_error(op, ": rank ", r, " passed ", posted_[size_t(r)].numel(), " values, rank ", rank, " ", t.numel());
      }
    return posted_;
  }
  void wait() { barrier_.arrive_and_wait(); }
  // After the last wait(): no rank reads rank's tensor any more.
  void release(int rank) { posted_[size_t(rank)] = Tensor(); }
  void abort() { barrier_.abort(); }
  void recover() {
    barrier_.recover();
    for (Tensor& t : posted_) t = Tensor();
  }

 private:
  RankBarrier barrier_;
  std::vector<Tensor> posted_;  // each rank's tensor while an exchange runs
};

}  // namespace tetra
