#include "bench/device_measure.h"

#include <chrono>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/error.h"
#ifdef TETRA_WITH_CUDA
#include "backend/cuda/launch_mode.h"
#include "bench/cuda_measure.h"
#endif

namespace tetra::bench {
namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("model name"))
      if (const auto colon = line.find(':'); colon != std::string::npos) return line.substr(colon + 2);
  return "cpu";
}

// memcpy between two 256 MiB host buffers: the best of 5 after one warm-up.
double host_copy_bandwidth() {
  const size_t bytes = size_t(256) << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  double best = 0;
  for (int i = 0; i < 6; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i > 0) best = std::max(best, 2.0 * double(bytes) / s);
    a[size_t(i)] = b[size_t(i) + 1];  // keep the copies observable
  }
  return best;
}

bool is_cuda(const std::string& device) {
  if (device == "cuda") {
#ifdef TETRA_WITH_CUDA
    return true;
#else
    runtime_error("--device cuda: tetra was built without the CUDA backend");
#endif
  }
  if (device != "cpu") usage_error("--device must be cpu or cuda, got '", device, "'");
  return false;
}

}  // namespace

DeviceInfo device_info(const std::string& device) {
#ifdef TETRA_WITH_CUDA
  if (is_cuda(device)) return {cuda_device_name(), cuda_device_memory(), cuda::early_launches() ? "early (PDL)" : "plain"};
#else
  is_cuda(device);
#endif
  return {cpu_model_name(), std::nullopt, ""};
}

Ceilings measure_ceilings(const std::string& device) {
#ifdef TETRA_WITH_CUDA
  if (is_cuda(device))
    return {cuda_copy_bandwidth(), "cudaMemcpyAsync device to device, 1 GiB, mean of 20 after a warm-up",
            cuda_bf16_gemm_rate(8192), "cublasGemmEx bf16 8192x8192x8192 (f32 accumulate) on random data, mean of 10 after 3 warm-ups"};
#else
  is_cuda(device);
#endif
  return {host_copy_bandwidth(), "memcpy 256 MiB host to host, best of 5", std::nullopt, ""};
}

std::optional<uint64_t> device_memory_used(const std::string& device) {
#ifdef TETRA_WITH_CUDA
  if (is_cuda(device)) return cuda_memory_used();
#else
  is_cuda(device);
#endif
  return std::nullopt;
}

ProfiledRegion::ProfiledRegion(const std::string& device) : cuda_(is_cuda(device)) {
#ifdef TETRA_WITH_CUDA
  if (cuda_) cuda_profiler_start();
#endif
}

ProfiledRegion::~ProfiledRegion() {
#ifdef TETRA_WITH_CUDA
  if (cuda_) cuda_profiler_stop();
#endif
}

}  // namespace tetra::bench
