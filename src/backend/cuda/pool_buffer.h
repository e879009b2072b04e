#pragma once
// RAII stream-ordered device memory (cudaMallocAsync from the device's pool, freed in stream
// order): the transient operands of one call, which the backend's pool recycles without a
// cudaMalloc. Movable, not copyable.
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "backend/cuda/cuda_check.h"

namespace tetra::cuda {

class PoolBuffer {
 public:
  PoolBuffer() = default;
  PoolBuffer(size_t bytes, cudaStream_t stream) : stream_(stream) {
    if (bytes) TETRA_CUDA_CHECK(cudaMallocAsync(&ptr_, bytes, stream));
  }
  ~PoolBuffer() {
    if (ptr_) cudaFreeAsync(ptr_, stream_);
  }
  PoolBuffer(PoolBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), stream_(o.stream_) {}
  PoolBuffer& operator=(PoolBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(stream_, o.stream_);
    return *this;
  }
  PoolBuffer(const PoolBuffer&) = delete;
  PoolBuffer& operator=(const PoolBuffer&) = delete;

  template <class T = void>
  T* get() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace tetra::cuda
