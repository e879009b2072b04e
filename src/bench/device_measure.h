#pragma once
// What the benchmark measures about the device it runs on, in the same run as the model:
// its name and memory, and the two ceilings every figure is a ratio of: copy bandwidth
// (bytes read + written per second) and the bf16 matrix rate (cuBLAS on the GPU).
#include <cstdint>
#include <optional>
#include <string>

namespace tetra::bench {

struct DeviceInfo {
  std::string name;                   // "NVIDIA H200", or the CPU's model name
  std::optional<uint64_t> memory;     // device memory (GPU only)
  std::string kernel_launches;        // GPU: "early (PDL)" or "plain" (launch_mode.h); CPU: empty
};

struct Ceilings {
  double copy_bytes_per_s = 0;                 // read + write
  std::string copy_method;
  std::optional<double> matrix_flops_per_s;    // bf16 GEMM (GPU only)
  std::string matrix_method;
};

// `device` as for make_backend ("cpu" or "cuda").
DeviceInfo device_info(const std::string& device);
Ceilings measure_ceilings(const std::string& device);
// Memory in use on the device now (GPU only): for load progress.
std::optional<uint64_t> device_memory_used(const std::string& device);

// While alive, a profiler started with collection off records the device's work (on the GPU:
// cudaProfilerStart/Stop, for `ncu --profile-from-start off`; nothing on the CPU).
class ProfiledRegion {
 public:
  explicit ProfiledRegion(const std::string& device);
  ~ProfiledRegion();
  ProfiledRegion(const ProfiledRegion&) = delete;
  ProfiledRegion& operator=(const ProfiledRegion&) = delete;

 private:
  bool cuda_ = false;
};

}  // namespace tetra::bench
