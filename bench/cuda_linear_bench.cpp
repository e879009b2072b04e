// Decode-shaped linear layers on the CUDA backend's kernel, weights in their checkpoint formats:
// achieved weight bytes/s against the measured device-copy bandwidth (read + write) of the same
// GPU, and for bf16 weights the time of cuBLAS's bf16 GEMM on the same shapes (the peer).
// Weights rotate through copies totalling well beyond the L2, as in a real decode step.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <random>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/linear.h"

namespace {
using tetra::DType;
using tetra::WeightFormat;
using tetra::cuda::DeviceBuffer;

struct Shape {
  const char* what;
  int64_t out, in;
};

struct Format {
  const char* name;
  WeightFormat format;
  DType weight_dtype, scale_dtype;
  double bytes_per_weight;
  int64_t scale_block_rows, scale_block_cols, scale_bytes;  // one scale per rows×cols block
  uint8_t scale_byte;  // the byte pattern of a scale of 1
};

// RAII cuBLAS handle.
class Cublas {
 public:
  Cublas() {
    if (cublasCreate(&handle_) != CUBLAS_STATUS_SUCCESS) tetra::runtime_error("cublasCreate failed");
  }
  ~Cublas() { cublasDestroy(handle_); }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// Elapsed milliseconds per call of f, over `iterations` calls after one warm-up.
template <class F>
float time_ms(int iterations, F&& f) {
  cudaEvent_t start, stop;
  TETRA_CUDA_CHECK(cudaEventCreate(&start));
  TETRA_CUDA_CHECK(cudaEventCreate(&stop));
  f(0);
  TETRA_CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < iterations; ++i) f(i);
  TETRA_CUDA_CHECK(cudaEventRecord(stop));
  TETRA_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  TETRA_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / float(iterations);
}

}  // namespace

int main() {
  const size_t copy_bytes = size_t(1) << 30;
  DeviceBuffer a(copy_bytes), b(copy_bytes);
  const float copy_ms = time_ms(20, [&](int) { cudaMemcpyAsync(b.get(), a.get(), copy_bytes, cudaMemcpyDeviceToDevice); });
  const double copy_gbs = 2.0 * double(copy_bytes) / (copy_ms * 1e6);
  std::printf("device copy: %.0f GB/s (read + write)\n\n", copy_gbs);

  const std::vector<Shape> shapes{{"V4-Flash wq_b", 32768, 1024}, {"V4-Flash wo_b", 4096, 8192}, {"V4-Flash expert w1", 2048, 4096}};
  const std::vector<Format> formats{
      {"bf16", WeightFormat::dense, DType::bf16, DType::f32, 2.0, 0, 0, 0, 0},
      {"fp8_block", WeightFormat::fp8_block, DType::f8_e4m3, DType::f8_e8m0, 1.0, 128, 128, 1, 127},
      {"mxfp4", WeightFormat::mxfp4, DType::u8, DType::f8_e8m0, 0.5, 1, 32, 1, 127},
      {"nvfp4", WeightFormat::nvfp4, DType::u8, DType::f8_e4m3, 0.5, 1, 16, 1, 0x38},
  };
  std::mt19937 rng(1);
  const Cublas cublas;
  std::printf("%-20s %-10s %5s %10s %10s %8s %12s\n", "matrix", "format", "n", "us", "GB/s", "of copy", "cuBLAS bf16 us");
  for (const Shape& s : shapes)
    for (const Format& f : formats) {
      const size_t weight_bytes = size_t(double(s.out * s.in) * f.bytes_per_weight);
      const size_t scales = f.scale_bytes ? size_t((s.out + f.scale_block_rows - 1) / f.scale_block_rows *
                                                   ((s.in + f.scale_block_cols - 1) / f.scale_block_cols))
                                          : 0;
      // Copies beyond the 50 MB L2, each with codes that avoid NaN patterns.
      const int copies = int(std::max<size_t>(4, (size_t(400) << 20) / weight_bytes));
      std::vector<uint8_t> host(weight_bytes);
      for (auto& x : host) x = uint8_t(rng() & (f.format == WeightFormat::dense ? 0x3F : 0x77));
      std::vector<DeviceBuffer> weights;
      for (int c = 0; c < copies; ++c) {
        weights.emplace_back(weight_bytes);
        TETRA_CUDA_CHECK(cudaMemcpy(weights.back().get(), host.data(), weight_bytes, cudaMemcpyHostToDevice));
      }
      DeviceBuffer scale(std::max<size_t>(scales, 1));
      TETRA_CUDA_CHECK(cudaMemset(scale.get(), f.scale_byte, scale.bytes()));
      for (int64_t n : {1, 8, 64}) {
        DeviceBuffer x(size_t(n * s.in) * sizeof(float)), y(size_t(n * s.out) * sizeof(float));
        TETRA_CUDA_CHECK(cudaMemset(x.get(), 0, x.bytes()));
        const float ms = time_ms(50, [&](int i) {
          const tetra::cuda::WeightRef w{f.format, f.weight_dtype, f.scale_dtype, weights[size_t(i % copies)].get(),
                                         scale.get(), 1.0f, s.out, s.in};
          tetra::cuda::linear(w, x.get<float>(), n, 1, true, y.get<float>(), nullptr);
        });
        const double gbs = double(weight_bytes + scales) / (ms * 1e6);
        float peer_ms = 0;
        if (f.format == WeightFormat::dense) {  // y = x·wᵀ as a column-major GEMM: C[out, n] = Wᵀ[in, out]ᵀ·X[in, n]
          DeviceBuffer xb(size_t(n * s.in) * 2);
          TETRA_CUDA_CHECK(cudaMemset(xb.get(), 0, xb.bytes()));
          const float alpha = 1, beta = 0;
          peer_ms = time_ms(50, [&](int i) {
            cublasGemmEx(cublas.get(), CUBLAS_OP_T, CUBLAS_OP_N, int(s.out), int(n), int(s.in), &alpha,
                         weights[size_t(i % copies)].get(), CUDA_R_16BF, int(s.in), xb.get(), CUDA_R_16BF, int(s.in), &beta,
                         y.get(), CUDA_R_32F, int(s.out), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
          });
        }
        char peer[32] = "-";
        if (peer_ms > 0) std::snprintf(peer, sizeof peer, "%.1f", peer_ms * 1e3);
        std::printf("%-20s %-10s %5lld %10.1f %10.0f %7.0f%% %12s\n", s.what, f.name, (long long)n, ms * 1e3, gbs,
                    100.0 * gbs / copy_gbs, peer);
      }
    }
  return 0;
}
