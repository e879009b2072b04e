// tetra_cuda_cluster_occupancy: how many thread-block clusters of 1, 2, 4 and 8 blocks (256
// threads, the decode linears' 8-warp blocks) run at once when a multiprocessor holds 1, 2 or 3
// such blocks (cudaOccupancyMaxActiveClusters; the blocks' count an SM is set by their shared
// memory here, by registers in the linears). A cluster's blocks share one GPC, so clusters of 4
// and 8 leave SMs idle: a linear whose row tiles take more clusters than this runs in two waves
// (docs/perf.md, forty-second run). Usage: tetra_cuda_cluster_occupancy (no options).
#include <cstdio>

#include "backend/cuda/cuda_check.h"
#include "report_errors.h"

namespace {

__global__ void empty_kernel() {}

constexpr int kThreads = 256;

int run() {
  int device = 0;
  TETRA_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  TETRA_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::printf("%s, %d SMs, %zu bytes of shared memory an SM; blocks of %d threads\n", prop.name,
              prop.multiProcessorCount, prop.sharedMemPerMultiprocessor, kThreads);
  TETRA_CUDA_CHECK(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        int(prop.sharedMemPerBlockOptin)));
  TETRA_CUDA_CHECK(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  std::printf("%-13s %9s %9s %9s %9s   (clusters at once, and their blocks)\n", "blocks an SM", "of 1", "of 2", "of 4",
              "of 8");
  for (int per_sm : {1, 2, 3}) {
    // Each block's share of the SM's shared memory, less 2 KB: the 1 KB the runtime reserves a
    // block, and 1 KB more so that one block an SM stays within the per-block opt-in limit.
    const size_t shared = prop.sharedMemPerMultiprocessor / size_t(per_sm) - 2048;
    std::printf("%-13d", per_sm);
    for (int size : {1, 2, 4, 8}) {
      cudaLaunchAttribute cluster{};
      cluster.id = cudaLaunchAttributeClusterDimension;
      cluster.val.clusterDim.x = unsigned(size);
      cluster.val.clusterDim.y = 1;
      cluster.val.clusterDim.z = 1;
      cudaLaunchConfig_t config{};
      config.gridDim = dim3(unsigned(size * prop.multiProcessorCount));
      config.blockDim = dim3(kThreads);
      config.dynamicSmemBytes = shared;
      config.attrs = &cluster;
      config.numAttrs = 1;
      int clusters = 0;
      TETRA_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, empty_kernel, &config));
      char cell[32];
      std::snprintf(cell, sizeof cell, "%d (%d)", clusters, clusters * size);
      std::printf(" %9s", cell);
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace

int main() { return report_errors("tetra_cuda_cluster_occupancy", run); }
