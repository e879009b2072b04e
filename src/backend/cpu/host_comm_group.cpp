#include "backend/cpu/host_comm_group.h"

#include <algorithm>

#include "backend/rank_barrier.h"
#include "core/error.h"

namespace tetra {
namespace {

class HostCommGroup final : public CommGroup {
 public:
  explicit HostCommGroup(int ranks) : barrier_(ranks), posted_(size_t(ranks)) {}

  int ranks() const override { return barrier_.ranks(); }

  void all_reduce_sum(int rank, Tensor& t) override {
    if (rank < 0 || rank >= ranks()) runtime_error("all_reduce_sum: rank ", rank, " of a group of ", ranks());
    if (t.type() != ElemType::f32) runtime_error("all_reduce_sum: rank ", rank, " passed a tensor that is not f32");
    posted_[size_t(rank)] = t;
    barrier_.arrive_and_wait();  // every rank's tensor is posted
    for (int r = 0; r < ranks(); ++r)
      if (posted_[size_t(r)].numel() != t.numel()) {
        abort();
        runtime_error("all_reduce_sum: rank ", r, " passed ", posted_[size_t(r)].numel(), " values, rank ", rank, " ",
                      t.numel());
      }
    const int64_t n = t.numel();
    std::vector<float> sum(posted_[0].data<float>(), posted_[0].data<float>() + n);
    for (int r = 1; r < ranks(); ++r) {
      const float* x = posted_[size_t(r)].data<float>();
      for (int64_t i = 0; i < n; ++i) sum[size_t(i)] += x[i];
    }
    barrier_.arrive_and_wait();  // every rank has read the others' tensors: each may overwrite its own
    std::copy(sum.begin(), sum.end(), t.data<float>());
    posted_[size_t(rank)] = Tensor();
  }

  // The ranks share the host's memory: rank 0's tensor is every rank's.
  Tensor broadcast(int rank, const Tensor& t) override {
    if (rank < 0 || rank >= ranks()) runtime_error("broadcast: rank ", rank, " of a group of ", ranks());
    return t;
  }

  void abort() override { barrier_.abort(); }
  void recover() override {
    barrier_.recover();
    for (Tensor& t : posted_) t = Tensor();
  }

 private:
  RankBarrier barrier_;
  std::vector<Tensor> posted_;  // each rank's tensor while a reduction runs
};

}  // namespace

std::unique_ptr<CommGroup> make_host_comm_group(int ranks) { return std::make_unique<HostCommGroup>(ranks); }

}  // namespace tetra
