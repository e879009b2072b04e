#include "backend/cuda/cuda_comm_group.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_event.h"
#include "backend/rank_barrier.h"
#include "core/error.h"

namespace tetra {
namespace {

constexpr int kMaxRanks = 64;  // --expert-parallel's limit

struct RankSources {
  const float* x[kMaxRanks];
};

// out[i] = x[0][i] + x[1][i] + ... in rank order (the host group's order).
__global__ void sum_ranks_kernel(RankSources sources, int ranks, int64_t n, float* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float acc = sources.x[0][i];
    for (int r = 1; r < ranks; ++r) acc += sources.x[r][i];
    out[i] = acc;
  }
}

class CudaCommGroup final : public CommGroup {
 public:
  explicit CudaCommGroup(const std::vector<Backend*>& backends)
      : barrier_(int(backends.size())), backends_(backends), posted_(backends.size()) {
    if (backends.size() > size_t(kMaxRanks)) runtime_error("expert parallelism: at most ", kMaxRanks, " ranks");
    for (size_t r = 0; r < backends.size(); ++r) {
      backends[r]->bind_thread();
      const int device = cuda_device_of(*backends[r]);
      // each rank reads the others' tensors where they are
      for (size_t s = 0; s < backends.size(); ++s) {
        const int peer = cuda_device_of(*backends[s]);
        if (peer == device) continue;
        int can = 0;
        TETRA_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device, peer));
        if (!can) runtime_error("expert parallelism: GPU ", device, " cannot read GPU ", peer, "'s memory (no peer access)");
        const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
        else TETRA_CUDA_CHECK(e);
      }
      posted_events_.push_back(std::make_unique<cuda::CudaEvent>(cudaEventDisableTiming));
      read_events_.push_back(std::make_unique<cuda::CudaEvent>(cudaEventDisableTiming));
    }
    backends.front()->bind_thread();
  }

  int ranks() const override { return barrier_.ranks(); }

  void all_reduce_sum(int rank, Tensor& t) override {
    if (rank < 0 || rank >= ranks()) runtime_error("all_reduce_sum: rank ", rank, " of a group of ", ranks());
    if (t.type() != ElemType::f32) runtime_error("all_reduce_sum: rank ", rank, " passed a tensor that is not f32");
    Backend& be = *backends_[size_t(rank)];
    const cudaStream_t stream = cuda_stream_of(be);
    posted_[size_t(rank)] = t;
    TETRA_CUDA_CHECK(cudaEventRecord(posted_events_[size_t(rank)]->get(), stream));
    barrier_.arrive_and_wait();  // every rank's tensor and its event are posted
    RankSources sources{};
    for (int r = 0; r < ranks(); ++r) {
      if (posted_[size_t(r)].numel() != t.numel()) {
        abort();
        runtime_error("all_reduce_sum: rank ", r, " passed ", posted_[size_t(r)].numel(), " values, rank ", rank, " ",
                      t.numel());
      }
      sources.x[r] = posted_[size_t(r)].data<float>();
      if (r != rank) TETRA_CUDA_CHECK(cudaStreamWaitEvent(stream, posted_events_[size_t(r)]->get()));
    }
    Tensor sum = be.zeros(t.shape(), ElemType::f32);
    const int64_t n = t.numel();
    if (n > 0) {
      const unsigned blocks = unsigned(std::min<int64_t>((n + 255) / 256, 4096));
      sum_ranks_kernel<<<blocks, 256, 0, stream>>>(sources, ranks(), n, sum.data<float>());
      TETRA_CUDA_CHECK(cudaGetLastError());
    }
    TETRA_CUDA_CHECK(cudaEventRecord(read_events_[size_t(rank)]->get(), stream));
    barrier_.arrive_and_wait();  // every rank's reads are queued, their events recorded
    // this rank's later work (which may reuse t's memory) waits for the others' reads of t
    for (int r = 0; r < ranks(); ++r)
      if (r != rank) TETRA_CUDA_CHECK(cudaStreamWaitEvent(stream, read_events_[size_t(r)]->get()));
    posted_[size_t(rank)] = Tensor();
    t = std::move(sum);
  }

  Tensor broadcast(int rank, const Tensor& t) override {
    if (rank < 0 || rank >= ranks()) runtime_error("broadcast: rank ", rank, " of a group of ", ranks());
    Backend& be = *backends_[size_t(rank)];
    const cudaStream_t stream = cuda_stream_of(be);
    if (rank == 0) TETRA_CUDA_CHECK(cudaEventRecord(posted_events_[0]->get(), stream));
    barrier_.arrive_and_wait();  // rank 0's tensor is complete once its event is
    Tensor copy = t;
    if (rank != 0) {
      TETRA_CUDA_CHECK(cudaStreamWaitEvent(stream, posted_events_[0]->get()));
      copy = be.zeros(t.shape(), t.type());
      TETRA_CUDA_CHECK(cudaMemcpyPeerAsync(copy.data<std::byte>(), cuda_device_of(be), t.data<std::byte>(),
                                           cuda_device_of(*backends_[0]), size_t(t.numel() * elem_bytes(t.type())),
                                           stream));
      TETRA_CUDA_CHECK(cudaEventRecord(read_events_[size_t(rank)]->get(), stream));
    }
    barrier_.arrive_and_wait();  // every copy is queued
    if (rank == 0)  // rank 0's later work (which may reuse t's memory) waits for the copies
      for (int r = 1; r < ranks(); ++r) TETRA_CUDA_CHECK(cudaStreamWaitEvent(stream, read_events_[size_t(r)]->get()));
    return copy;
  }

  void abort() override { barrier_.abort(); }
  void recover() override {
    barrier_.recover();
    for (Tensor& t : posted_) t = Tensor();
  }

 private:
  RankBarrier barrier_;
  std::vector<Backend*> backends_;
  std::vector<Tensor> posted_;  // each rank's tensor while a reduction runs
  std::vector<std::unique_ptr<cuda::CudaEvent>> posted_events_, read_events_;  // per rank, on its device
};

}  // namespace

std::unique_ptr<CommGroup> make_cuda_comm_group(const std::vector<Backend*>& backends) {
  return std::make_unique<CudaCommGroup>(backends);
}

}  // namespace tetra
