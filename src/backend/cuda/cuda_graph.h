#pragma once
// RAII CUDA graph: the captured graph and its executable instance, launched on the stream it
// was captured from; it keeps the arena its tensors were placed in.
#include <cuda_runtime.h>

#include <functional>
#include <memory>

#include "backend/backend.h"
#include "backend/cuda/capture_arena.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_stream.h"

namespace tetra::cuda {

class CudaGraph final : public DeviceGraph {
 public:
  // Records what `body` enqueues on `stream` (which must have no other work being captured).
  CudaGraph(std::shared_ptr<CudaStream> stream, std::shared_ptr<CaptureArena> arena, const std::function<void()>& body)
      : stream_(std::move(stream)), arena_(std::move(arena)) {
    TETRA_CUDA_CHECK(cudaStreamBeginCapture(stream_->get(), cudaStreamCaptureModeThreadLocal));
    try {
      body();
    } catch (...) {
      cudaStreamEndCapture(stream_->get(), &graph_);
      if (graph_) cudaGraphDestroy(graph_);
      throw;
    }
    TETRA_CUDA_CHECK(cudaStreamEndCapture(stream_->get(), &graph_));
    TETRA_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  ~CudaGraph() override {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  void launch() override { TETRA_CUDA_CHECK(cudaGraphLaunch(exec_, stream_->get())); }

 private:
  std::shared_ptr<CudaStream> stream_;
  std::shared_ptr<CaptureArena> arena_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace tetra::cuda
