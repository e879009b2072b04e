#pragma once
// RAII CUDA stream: created non-blocking (no implicit sync with the legacy default stream),
// destroyed with its owner. Tensors share it so their stream-ordered frees outlive the backend.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"

namespace tetra::cuda {

class CudaStream {
 public:
  CudaStream() { TETRA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~CudaStream() {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  cudaStream_t get() const { return stream_; }
  void synchronize() const { TETRA_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace tetra::cuda
