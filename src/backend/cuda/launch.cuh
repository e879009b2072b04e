#pragma once
// Kernels chained by programmatic dependent launch (PDL). A kernel started with
// `launch_early` may begin while the kernel before it on the stream is still running, as soon
// as that kernel has called allow_next_kernel() in every block; so it can request what depends
// on nothing earlier (its weights) ahead of time. The contract for a kernel started this way:
// call wait_for_inputs() before reading anything an earlier kernel wrote AND before writing
// anything (the buffer may still be read by an earlier kernel); what it reads before then must
// be immutable (weights). allow_next_kernel() is harmless in any kernel: the next one still
// waits for this one to finish before it touches data.
// What an earlier kernel wrote is read with coherent loads (a plain dereference, or __ldca where
// that compiles to generic loads), never __ldg or a const __restrict__ pointer: ptxas takes a
// non-coherent load's data as constant for the whole kernel and issued the FP8 linears' activation
// loads before griddepcontrol.wait (their SASS, docs/cuda.md "PDL"; the NaN of the V4-Flash decode). tools/pdl_sass_check.py finds such loads in a build's kernels.
// Whether launch_early launches early at all: early_launches() (launch_mode.h; the environment's
// TETRA_CUDA_PDL, else the build's default).
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch_mode.h"

namespace tetra::cuda {

__device__ __forceinline__ void wait_for_inputs() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_next_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Kernels whose shared memory, static and dynamic together, passes the default 48 KB must opt in
// to the dynamic part (per kernel); the launch fails with "invalid argument" otherwise.
template <typename Kernel>
void allow_shared_bytes(Kernel kernel, size_t bytes) {
  if (bytes == 0) return;
  cudaFuncAttributes attributes{};
  TETRA_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  if (bytes + attributes.sharedSizeBytes > 48 * 1024)
    TETRA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

// Blocks of `kernel` that run at once on the whole device (one wave), at `threads` threads and
// `shared_bytes` of dynamic shared memory a block.
template <typename Kernel>
int64_t one_wave_blocks(Kernel kernel, int threads, size_t shared_bytes) {
  int device = 0, sms = 0, blocks = 0;
  TETRA_CUDA_CHECK(cudaGetDevice(&device));
  TETRA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  allow_shared_bytes(kernel, shared_bytes);
  TETRA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, shared_bytes));
  return int64_t(blocks) * sms;
}

// cluster_x > 1: consecutive blocks along x form clusters of that many (sharing their shared
// memory, sm_90+; at most 8).
template <typename... Params, typename... Args>
void launch_early_clustered(void (*kernel)(Params...), dim3 grid, dim3 block, unsigned cluster_x, size_t shared_bytes,
                            cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attributes[2]{};
  attributes[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[0].val.programmaticStreamSerializationAllowed = early_launches();
  attributes[1].id = cudaLaunchAttributeClusterDimension;
  attributes[1].val.clusterDim.x = cluster_x;
  attributes[1].val.clusterDim.y = 1;
  attributes[1].val.clusterDim.z = 1;
  allow_shared_bytes(kernel, shared_bytes);
  const cudaLaunchConfig_t config{grid, block, shared_bytes, stream, attributes, cluster_x > 1 ? 2u : 1u};
  TETRA_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

template <typename... Params, typename... Args>
void launch_early(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                  Args&&... args) {
  launch_early_clustered(kernel, grid, block, 1, shared_bytes, stream, std::forward<Args>(args)...);
}

}  // namespace tetra::cuda
