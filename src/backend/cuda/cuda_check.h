#pragma once
// Turns a failed CUDA runtime call into a tetra runtime Error naming the call and location.
#include <cuda_runtime.h>

#include "core/error.h"

#define TETRA_CUDA_CHECK(call)                                                                   \
  do {                                                                                           \
    const cudaError_t tetra_cuda_status = (call);                                                \
    if (tetra_cuda_status != cudaSuccess)                                                        \
      ::tetra::runtime_error("CUDA call ", #call, " failed at ", __FILE__, ":", __LINE__, ": ", \
                             cudaGetErrorString(tetra_cuda_status));                             \
  } while (0)
