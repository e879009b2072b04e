#pragma once
// RAII cuBLAS handle bound to one stream, with its own workspace (so that no call allocates,
// and the calls stay legal inside a captured CUDA graph).
#include <cublas_v2.h>

#include "backend/cuda/device_buffer.h"
#include "core/error.h"

#define TETRA_CUBLAS_CHECK(call)                                                                  \
  do {                                                                                            \
    const cublasStatus_t tetra_cublas_status = (call);                                            \
    if (tetra_cublas_status != CUBLAS_STATUS_SUCCESS)                                             \
      ::tetra::runtime_error("cuBLAS call ", #call, " failed at ", __FILE__, ":", __LINE__, ": ", \
                             cublasGetStatusString(tetra_cublas_status));                         \
  } while (0)

namespace tetra::cuda {

class CublasHandle {
 public:
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // cuBLAS's advice for Hopper

  explicit CublasHandle(cudaStream_t stream) : workspace_(kWorkspaceBytes) {
    TETRA_CUBLAS_CHECK(cublasCreate(&handle_));
    TETRA_CUBLAS_CHECK(cublasSetStream(handle_, stream));
    TETRA_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_.get(), workspace_.bytes()));
  }
  ~CublasHandle() { cublasDestroy(handle_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  cublasHandle_t get() const { return handle_; }

 private:
  DeviceBuffer workspace_;
  cublasHandle_t handle_ = nullptr;
};

}  // namespace tetra::cuda
