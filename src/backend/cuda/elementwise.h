#pragma once
// Row gathers and element-wise f32 operations.
#include <cuda_runtime.h>

#include <cstdint>

namespace tetra::cuda {

// out[r] = table[ids[r]] (rows of `width` floats); ids must lie in [0, table_rows): the model
// checks token ids on the host, and a bad one stops the kernel (a CUDA error at the next sync).
void gather_rows(const float* table, int64_t table_rows, int64_t width, const int32_t* ids, int64_t n, float* out,
                 cudaStream_t stream);
void add(const float* a, const float* b, int64_t n, float* out, cudaStream_t stream);
// silu(min(gate, limit)) · clamp(up, -limit, limit); limit <= 0: no clamp.
void swiglu(const float* gate, const float* up, int64_t n, float limit, float* out, cudaStream_t stream);

}  // namespace tetra::cuda
