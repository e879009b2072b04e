#include "backend/cuda/device.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <string>

namespace tetra::cuda {

DeviceStatus probe_device() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return {false, std::string("no usable CUDA device: ") + cudaGetErrorString(err)};
  if (count == 0) return {false, "no CUDA device present"};
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return {false, "cannot read CUDA device 0 properties"};
  char memory[32];
  std::snprintf(memory, sizeof memory, "%.1f GiB", double(prop.totalGlobalMem) / double(1ull << 30));
  return {true, std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
                    memory + ")"};
}

}  // namespace tetra::cuda
