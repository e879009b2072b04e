#pragma once
// Which CUDA device is usable here, for start-up messages and for GPU tests that must say why
// they skip on machines without one.
#include <string>

namespace tetra::cuda {

struct DeviceStatus {
  bool usable = false;
  std::string description;  // "NVIDIA H200 (sm_90, 139.8 GiB)" or why no device is usable
};

DeviceStatus probe_device();

}  // namespace tetra::cuda
