#pragma once
// The CUDA side of device_measure (built only with the CUDA backend): device 0's name and
// memory, its copy bandwidth and cuBLAS's bf16 matrix rate.
#include <cstdint>
#include <string>

namespace tetra::bench {

std::string cuda_device_name();
uint64_t cuda_device_memory();
uint64_t cuda_memory_used();
double cuda_copy_bandwidth();           // bytes read + written per second
double cuda_bf16_gemm_rate(int64_t n);  // FLOP/s of an n×n×n bf16 GEMM
// Brackets what a profiler started with collection off (ncu --profile-from-start off) records.
void cuda_profiler_start();
void cuda_profiler_stop() noexcept;

}  // namespace tetra::bench
