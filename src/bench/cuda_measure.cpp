#include "bench/cuda_measure.h"

#include <cublas_v2.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <vector>

#include "backend/cuda/cublas_handle.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_event.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/device_buffer.h"
#include "bench/random_fill.h"
#include "core/dtype.h"

namespace tetra::bench {
namespace {

// Seconds per call of f over `iterations` calls on `stream`, after `warmup` calls.
template <class F>
double seconds_per_call(cudaStream_t stream, int warmup, int iterations, F&& f) {
  for (int i = 0; i < warmup; ++i) f();
  cuda::CudaEvent start, stop;
  TETRA_CUDA_CHECK(cudaEventRecord(start.get(), stream));
  for (int i = 0; i < iterations; ++i) f();
  TETRA_CUDA_CHECK(cudaEventRecord(stop.get(), stream));
  TETRA_CUDA_CHECK(cudaEventSynchronize(stop.get()));
  float ms = 0;
  TETRA_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return double(ms) * 1e-3 / iterations;
}

}  // namespace

std::string cuda_device_name() {
  cudaDeviceProp prop{};
  TETRA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  return prop.name;
}

uint64_t cuda_device_memory() {
  size_t free = 0, total = 0;
  TETRA_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return total;
}

uint64_t cuda_memory_used() {
  size_t free = 0, total = 0;
  TETRA_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return total - free;
}

double cuda_copy_bandwidth() {
  const size_t bytes = size_t(1) << 30;
  const cuda::CudaStream stream;
  cuda::DeviceBuffer a(bytes), b(bytes);
  TETRA_CUDA_CHECK(cudaMemsetAsync(a.get(), 0x5a, bytes, stream.get()));
  const double s = seconds_per_call(stream.get(), 1, 20, [&] {
    TETRA_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, stream.get()));
  });
  return 2.0 * double(bytes) / s;
}

double cuda_bf16_gemm_rate(int64_t n) {
  const cuda::CudaStream stream;
  const cuda::CublasHandle cublas(stream.get());
  const size_t count = size_t(n * n);
  std::vector<uint16_t> host(count);
  parallel_fill(7, int64_t(count), [&](SplitMix64& r, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) host[size_t(i)] = f32_to_bf16(r.symmetric());
  });
  cuda::DeviceBuffer a(count * 2), b(count * 2), c(count * 2);
  TETRA_CUDA_CHECK(cudaMemcpy(a.get(), host.data(), count * 2, cudaMemcpyHostToDevice));
  TETRA_CUDA_CHECK(cudaMemcpy(b.get(), host.data(), count * 2, cudaMemcpyHostToDevice));
  const float alpha = 1, beta = 0;
  const int m = int(n);
  const double s = seconds_per_call(stream.get(), 3, 10, [&] {
    if (cublasGemmEx(cublas.get(), CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &alpha, a.get(), CUDA_R_16BF, m, b.get(), CUDA_R_16BF,
                     m, &beta, c.get(), CUDA_R_16BF, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
      runtime_error("cublasGemmEx (bf16 ", n, "^3) failed");
  });
  return 2.0 * double(n) * double(n) * double(n) / s;
}

void cuda_profiler_start() { TETRA_CUDA_CHECK(cudaProfilerStart()); }
// Called from a destructor; a profiler that fails to stop costs nothing the run reports.
void cuda_profiler_stop() noexcept { static_cast<void>(cudaProfilerStop()); }

}  // namespace tetra::bench
