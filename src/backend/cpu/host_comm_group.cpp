#include "backend/cpu/host_comm_group.h"

#include <algorithm>

#include "backend/tensor_exchange.h"

namespace tetra {
namespace {

class HostCommGroup final : public CommGroup {
 public:
  explicit HostCommGroup(int ranks) : exchange_(ranks) {}

  int ranks() const override { return exchange_.ranks(); }

  void all_reduce_sum(int rank, Tensor& t) override {
    const std::vector<Tensor>& posted = exchange_.post_and_wait("all_reduce_sum", rank, t);
    const int64_t n = t.numel();
    std::vector<float> sum(posted[0].data<float>(), posted[0].data<float>() + n);
    for (int r = 1; r < ranks(); ++r) {
      const float* x = posted[size_t(r)].data<float>();
      for (int64_t i = 0; i < n; ++i) sum[size_t(i)] += x[i];
    }
    exchange_.wait();  // every rank has read the others' tensors: each may overwrite its own
    std::copy(sum.begin(), sum.end(), t.data<float>());
    exchange_.release(rank);
  }

  // The ranks share the host's memory: rank 0's tensor is every rank's.
  Tensor broadcast(int rank, const Tensor& t) override {
    exchange_.check_rank("broadcast", rank);
    return t;
  }

  void abort() override { exchange_.abort(); }
  void recover() override { exchange_.recover(); }

 private:
  TensorExchange exchange_;
};

}  // namespace

std::unique_ptr<CommGroup> make_host_comm_group(int ranks) { return std::make_unique<HostCommGroup>(ranks); }

}  // namespace tetra
