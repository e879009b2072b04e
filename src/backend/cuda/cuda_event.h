#pragma once
// RAII CUDA event: for timing on a stream, or (created with cudaEventDisableTiming) for ordering
// one stream's work after another's.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"

namespace tetra::cuda {

class CudaEvent {
 public:
  CudaEvent() { TETRA_CUDA_CHECK(cudaEventCreate(&event_)); }
  explicit CudaEvent(unsigned flags) { TETRA_CUDA_CHECK(cudaEventCreateWithFlags(&event_, flags)); }
  ~CudaEvent() { cudaEventDestroy(event_); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace tetra::cuda
