#include "backend/cuda/cuda_check.h"
#include "backend/cuda/paged.cuh"
#include "backend/cuda/launch.cuh"

namespace tetra::cuda {
namespace {

__global__ void store_rows_kernel(PagedView dst, const uint8_t* rows, StepView at, int64_t ring, int64_t ratio) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t r = blockIdx.x;
  const int32_t slot = at.slot[r], t = at.position[r];
  if (slot < 0) return;
  int64_t entry = -1;
  if (ring > 0 && t > at.last[r] - ring) entry = t % ring;
  if (ring == 0 && (t + 1) % ratio == 0) entry = (t + 1) / ratio - 1;
  if (entry < 0) return;
  uint8_t* out = paged_row(dst, slot, entry);
  const uint8_t* in = rows + r * dst.row_bytes;
  for (int64_t i = threadIdx.x; i < dst.row_bytes; i += blockDim.x) out[i] = in[i];
}

}  // namespace

void store_rows(PagedView dst, const uint8_t* rows, int64_t n, StepView at, int64_t ring, int64_t ratio,
                cudaStream_t stream) {
  if (n == 0) return;
  launch_early(store_rows_kernel, dim3(unsigned(n)), dim3(128), 0, stream, dst, rows, at, ring, ratio);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
