#include "backend/cuda/cuda_comm_group.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_event.h"
#include "backend/tensor_exchange.h"
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
      : exchange_(int(backends.size())), backends_(backends) {
    if (backends.size() > size_t(kMaxRanks)) runtime_error("expert parallelism: at most ", kMaxRanks, " ranks");
    in_turn(backends, [&](size_t r) {
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
    });
  }

  int ranks() const override { return exchange_.ranks(); }

  void all_reduce_sum(int rank, Tensor& t) override {
    exchange_.check_rank("all_reduce_sum", rank);
    Backend& be = *backends_[size_t(rank)];
    const cudaStream_t stream = cuda_stream_of(be);
    TETRA_CUDA_CHECK(cudaEventRecord(posted_events_[size_t(rank)]->get(), stream));
    // every rank's tensor and its event are posted
    const std::vector<Tensor>& posted = exchange_.post_and_wait("all_reduce_sum", rank, t);
    RankSources sources{};
    for (int r = 0; r < ranks(); ++r) {
      sources.x[r] = posted[size_t(r)].data<float>();
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
    exchange_.wait();  // every rank's reads are queued, their events recorded
    // this rank's later work (which may reuse t's memory) waits for the others' reads of t
    for (int r = 0; r < ranks(); ++r)
      if (r != rank) TETRA_CUDA_CHECK(cudaStreamWaitEvent(stream, read_events_[size_t(r)]->get()));
    exchange_.release(rank);
    t = std::move(sum);
  }

  Tensor broadcast(int rank, const Tensor& t) override {
    exchange_.check_rank("broadcast", rank);
    Backend& be = *backends_[size_t(rank)];
    const cudaStream_t stream = cuda_stream_of(be);
    if (rank == 0) TETRA_CUDA_CHECK(cudaEventRecord(posted_events_[0]->get(), stream));
    exchange_.wait();  // rank 0's tensor is complete once its event is
    Tensor copy = t;
    if (rank != 0) {
      TETRA_CUDA_CHECK(cudaStreamWaitEvent(stream, posted_events_[0]->get()));
      copy = be.zeros(t.shape(), t.type());
      TETRA_CUDA_CHECK(cudaMemcpyPeerAsync(copy.data<std::byte>(), cuda_device_of(be), t.data<std::byte>(),
                                           cuda_device_of(*backends_[0]), size_t(t.numel() * elem_bytes(t.type())),
                                           stream));
      TETRA_CUDA_CHECK(cudaEventRecord(read_events_[size_t(rank)]->get(), stream));
    }
    exchange_.wait();  // every copy is queued
    if (rank == 0)  // rank 0's later work (which may reuse t's memory) waits for the copies
      for (int r = 1; r < ranks(); ++r) TETRA_CUDA_CHECK(cudaStreamWaitEvent(stream, read_events_[size_t(r)]->get()));
    return copy;
  }

  void abort() override { exchange_.abort(); }
  void recover() override { exchange_.recover(); }

 private:
  TensorExchange exchange_;
  std::vector<Backend*> backends_;
  std::vector<std::unique_ptr<cuda::CudaEvent>> posted_events_, read_events_;  // per rank, on its device
};

}  // namespace

std::unique_ptr<CommGroup> make_cuda_comm_group(const std::vector<Backend*>& backends) {
  return std::make_unique<CudaCommGroup>(backends);
}

}  // namespace tetra
