// The CUDA backend's tensor-core (prefill) path at V4-Flash geometry, synthetic weights in each
// checkpoint format, against ceilings measured in the same run:
//   - the bf16 matrix rate: cuBLAS bf16 GEMM 8192³ (f32 accumulation) on random data;
//   - the device copy bandwidth (read + write);
//   - every V4-Flash linear shape at M = 2048 and 8192: dequant + cuBLAS (dequant_gemm.h) per
//     format, and cuBLAS bf16 on bf16 weights of the same shape (the peer);
//   - where the tensor-core path overtakes the decode kernels (M = 16 .. 256);
//   - the MoE layer (256 routed experts 2048×4096 + 1 shared, top-6) from 1 to 8192 tokens:
//     the grouped path (moe_grouped.h) and the per-pair decode path (moe.h, up to 256 tokens),
//     and from 64 tokens the grouped path's routed experts alone ("routed": sort, GEMMs, combine).
// Times are medians of per-call event pairs after two warm-up calls.
// Usage: tetra_cuda_prefill_bench [--json FILE]
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cublas_handle.h"
#include "backend/cuda/cuda_event.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/dequant_gemm.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/linear.h"
#include "backend/cuda/moe.h"
#include "backend/cuda/moe_grouped.h"
#include "json_option.h"
#include "report_errors.h"

namespace {
using tetra::DType;
using tetra::WeightFormat;
using tetra::cuda::DeviceBuffer;
using tetra::cuda::WeightRef;

// ---- synthetic data on the device (hash of the index: no host generation, never zeros)
__device__ uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
__device__ float unit(uint64_t seed, size_t i) {  // uniform in [-1, 1)
  return float(int64_t(mix64(seed ^ (i * 0x2545F4914F6CDD1Dull)) >> 40) - (int64_t(1) << 23)) / float(1 << 23);
}
__global__ void fill_bytes_kernel(uint8_t* p, size_t n, uint64_t seed, uint8_t and_mask, uint8_t or_mask) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = uint8_t((mix64(seed ^ (i * 0x2545F4914F6CDD1Dull)) & and_mask) | or_mask);
}
__global__ void fill_floats_kernel(float* p, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = scale * unit(seed, i);
}
__global__ void fill_bf16_kernel(__nv_bfloat16* p, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = __float2bfloat16_rn(scale * unit(seed, i));
}
void fill_bytes(void* p, size_t n, uint64_t seed, uint8_t and_mask, uint8_t or_mask, cudaStream_t s) {
  fill_bytes_kernel<<<4096, 256, 0, s>>>(static_cast<uint8_t*>(p), n, seed, and_mask, or_mask);
  TETRA_CUDA_CHECK(cudaGetLastError());
}
void fill_floats(void* p, size_t n, uint64_t seed, float scale, cudaStream_t s) {
  fill_floats_kernel<<<4096, 256, 0, s>>>(static_cast<float*>(p), n, seed, scale);
  TETRA_CUDA_CHECK(cudaGetLastError());
}
void fill_bf16(void* p, size_t n, uint64_t seed, float scale, cudaStream_t s) {
  fill_bf16_kernel<<<4096, 256, 0, s>>>(static_cast<__nv_bfloat16*>(p), n, seed, scale);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

// ---- weights in the checkpoint formats
struct Format {
  const char* name;
  WeightFormat format;
  DType weight_dtype, scale_dtype;
  int64_t elements_per_byte_den, elements_per_byte_num;  // bytes = elements · num / den
  int64_t block_rows, block_cols;                        // one scale per block (0: none)
  uint8_t code_mask, scale_byte;                         // codes without NaN patterns; a scale of 1
};
const Format kBf16{"bf16", WeightFormat::dense, DType::bf16, DType::f32, 1, 2, 0, 0, 0, 0};
const Format kFp8{"fp8_block", WeightFormat::fp8_block, DType::f8_e4m3, DType::f8_e8m0, 1, 1, 128, 128, 0x77, 127};
const Format kMxfp4{"mxfp4", WeightFormat::mxfp4, DType::u8, DType::f8_e8m0, 2, 1, 1, 32, 0xFF, 127};
const Format kNvfp4{"nvfp4", WeightFormat::nvfp4, DType::u8, DType::f8_e4m3, 2, 1, 1, 16, 0xFF, 0x38};

struct DeviceWeight {
  DeviceBuffer weight, scale;
  WeightRef ref;
  size_t bytes() const { return weight.bytes() + (ref.scale ? scale.bytes() : 0); }
};

DeviceWeight make_weight(const Format& f, int64_t out, int64_t in, uint64_t seed, cudaStream_t s) {
  DeviceWeight w;
  w.weight = DeviceBuffer(size_t(out * in * f.elements_per_byte_num / f.elements_per_byte_den));
  if (f.format == WeightFormat::dense)
    fill_bf16(w.weight.get(), size_t(out * in), seed, 0.05f, s);
  else
    fill_bytes(w.weight.get(), w.weight.bytes(), seed, f.code_mask, 0, s);
  if (f.block_rows) {
    w.scale = DeviceBuffer(size_t((out + f.block_rows - 1) / f.block_rows * ((in + f.block_cols - 1) / f.block_cols)));
    TETRA_CUDA_CHECK(cudaMemsetAsync(w.scale.get(), f.scale_byte, w.scale.bytes(), s));
  }
  w.ref = {f.format, f.weight_dtype, f.scale_dtype, w.weight.get(), w.scale.get(), 1.0f, out, in};
  return w;
}

// ---- timing
// Median milliseconds of one call of f on stream s.
template <class F>
double median_ms(cudaStream_t s, int iterations, F&& f) {
  f();
  f();
  std::vector<std::unique_ptr<tetra::cuda::CudaEvent>> start, stop;
  for (int i = 0; i < iterations; ++i) {
    start.push_back(std::make_unique<tetra::cuda::CudaEvent>());
    stop.push_back(std::make_unique<tetra::cuda::CudaEvent>());
    TETRA_CUDA_CHECK(cudaEventRecord(start.back()->get(), s));
    f();
    TETRA_CUDA_CHECK(cudaEventRecord(stop.back()->get(), s));
  }
  TETRA_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> ms;
  for (int i = 0; i < iterations; ++i) {
    float t = 0;
    TETRA_CUDA_CHECK(cudaEventElapsedTime(&t, start[size_t(i)]->get(), stop[size_t(i)]->get()));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// y[m, out] = x[m, groups·in] · wᵀ in bf16 with f32 output (block-diagonal when groups > 1).
void cublas_bf16(cublasHandle_t h, const void* w, const void* x, float* y, int64_t m, int64_t out, int64_t in,
                 int64_t groups) {
  const float alpha = 1, beta = 0;
  const int64_t per_group = out / groups;
  TETRA_CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(per_group), int(m), int(in), &alpha, w,
                                                CUDA_R_16BF, int(in), per_group * in, x, CUDA_R_16BF, int(groups * in), in,
                                                &beta, y, CUDA_R_32F, int(out), per_group, int(groups), CUBLAS_COMPUTE_32F,
                                                CUBLAS_GEMM_DEFAULT));
}

// Appends JSON records; written as one document at the end.
struct Json {
  std::vector<std::string> linear, crossover, moe;
  static std::string record(const char* fmt, ...) __attribute__((format(printf, 1, 2))) {
    char buf[512];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, args);
    va_end(args);
    return buf;
  }
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ",\n    " : "\n    ") + v[i];
  return s + "\n  ";
}

struct LinearShape {
  const char* name;
  int64_t out, in, groups;
};

}  // namespace

static int run(int argc, char** argv) {
  const std::string json_path = json_option(argc, argv);
  // Transient operands come from the stream-ordered pool, kept as the backend keeps it.
  cudaMemPool_t pool = nullptr;
  TETRA_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
  uint64_t keep = UINT64_MAX;
  TETRA_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  const tetra::cuda::CudaStream stream;
  const cudaStream_t s = stream.get();
  const tetra::cuda::CublasHandle cublas(s);
  tetra::cuda::DequantGemm gemm(s);
  cudaDeviceProp prop{};
  TETRA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0;
  TETRA_CUDA_CHECK(cudaDriverGetVersion(&driver));
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));

  // ---- ceilings
  double copy_gbs = 0, matrix_tflops = 0;
  {
    const size_t bytes = size_t(1) << 30;
    DeviceBuffer a(bytes), b(bytes);
    fill_bytes(a.get(), bytes, 1, 0xFF, 0, s);
    const double ms = median_ms(s, 10, [&] {
      TETRA_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, s));
    });
    copy_gbs = 2.0 * double(bytes) / (ms * 1e6);
  }
  {
    const int64_t n = 8192;
    DeviceBuffer a(size_t(n * n) * 2), b(size_t(n * n) * 2), c(size_t(n * n) * 2);
    fill_bf16(a.get(), size_t(n * n), 2, 1.0f, s);
    fill_bf16(b.get(), size_t(n * n), 3, 1.0f, s);
    const float alpha = 1, beta = 0;
    const double ms = median_ms(s, 20, [&] {
      TETRA_CUBLAS_CHECK(cublasGemmEx(cublas.get(), CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(n), int(n), &alpha, a.get(),
                                      CUDA_R_16BF, int(n), b.get(), CUDA_R_16BF, int(n), &beta, c.get(), CUDA_R_16BF, int(n),
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    });
    matrix_tflops = 2.0 * double(n * n * n) / (ms * 1e9);
  }
  std::printf("%s, driver %d, %s\n", prop.name, driver, date);
  std::printf("device copy: %.0f GB/s (read + write); cuBLAS bf16 8192^3: %.0f TFLOP/s\n\n", copy_gbs, matrix_tflops);
  Json json;

  // ---- linear layers at prefill sizes
  const std::vector<LinearShape> shapes{
      {"wq_a, compressor wkv/wgate", 1024, 4096, 1}, {"wkv", 512, 4096, 1},
      {"wq_b", 32768, 1024, 1},                      {"wo_a (8 groups)", 8192, 4096, 8},
      {"wo_b", 4096, 8192, 1},                       {"indexer wq_b", 8192, 1024, 1},
      {"shared w1/w3", 2048, 4096, 1},               {"shared w2", 4096, 2048, 1}};
  const std::vector<const Format*> formats{&kBf16, &kFp8, &kMxfp4, &kNvfp4};
  std::printf("%-28s %6s %10s %10s %8s %8s %12s %9s\n", "linear [out x in]", "M", "format", "us", "TFLOP/s",
              "of rate", "cuBLAS bf16", "vs cuBLAS");
  for (const LinearShape& sh : shapes) {
    const int64_t width = sh.groups * sh.in;
    for (int64_t m : {2048, 8192}) {
      DeviceBuffer x(size_t(m * width) * 4), xb(size_t(m * width) * 2), y(size_t(m * sh.out) * 4);
      fill_floats(x.get(), size_t(m * width), 4, 1.0f, s);
      fill_bf16(xb.get(), size_t(m * width), 4, 1.0f, s);
      const double flop = 2.0 * double(m) * double(sh.out) * double(sh.in);
      const int iterations = m == 2048 ? 20 : 10;
      DeviceWeight peer_w = make_weight(kBf16, sh.out, sh.in, 5, s);
      const double peer_ms = median_ms(s, iterations, [&] {
        cublas_bf16(cublas.get(), peer_w.weight.get(), xb.get(), y.get<float>(), m, sh.out, sh.in, sh.groups);
      });
      for (const Format* f : formats) {
        const DeviceWeight w = make_weight(*f, sh.out, sh.in, 6, s);
        const double ms = median_ms(s, iterations, [&] {
          gemm.linear(w.ref, 1.0f, x.get<float>(), m, sh.groups, true, y.get<float>());
        });
        const double tflops = flop / (ms * 1e9);
        std::printf("%-28s %6lld %10s %10.1f %8.0f %7.0f%% %12.1f %9.2f\n",
                    (std::string(sh.name) + " " + std::to_string(sh.out) + "x" + std::to_string(sh.in)).c_str(),
                    (long long)m, f->name, ms * 1e3, tflops, 100.0 * tflops / matrix_tflops, peer_ms * 1e3,
                    peer_ms / ms);
        json.linear.push_back(Json::record(
            "{\"shape\": \"%s\", \"out\": %lld, \"in\": %lld, \"groups\": %lld, \"m\": %lld, \"format\": \"%s\", "
            "\"us\": %.2f, \"tflops\": %.1f, \"of_matrix_rate\": %.4f, \"cublas_bf16_us\": %.2f}",
            sh.name, (long long)sh.out, (long long)sh.in, (long long)sh.groups, (long long)m, f->name, ms * 1e3, tflops,
            tflops / matrix_tflops, peer_ms * 1e3));
      }
    }
  }

  // ---- crossover: decode kernels (linear.cu) against the tensor-core path at small M
  std::printf("\n%-22s %6s %10s %14s %14s\n", "crossover [out x in]", "M", "format", "decode us", "tensor-core us");
  for (const LinearShape& sh : {LinearShape{"wq_b", 32768, 1024, 1}, LinearShape{"wo_b", 4096, 8192, 1},
                                LinearShape{"expert w1", 2048, 4096, 1}})
    for (const Format* f : {&kFp8, &kNvfp4}) {
      const DeviceWeight w = make_weight(*f, sh.out, sh.in, 7, s);
      for (int64_t m : {16, 32, 64, 128, 256}) {
        DeviceBuffer x(size_t(m * sh.in) * 4), y(size_t(m * sh.out) * 4);
        fill_floats(x.get(), size_t(m * sh.in), 8, 1.0f, s);
        const double decode_ms = median_ms(s, 10, [&] {
          tetra::cuda::linear(w.ref, x.get<float>(), m, 1, true, y.get<float>(), s);
        });
        const double tc_ms = median_ms(s, 10, [&] { gemm.linear(w.ref, 1.0f, x.get<float>(), m, 1, true, y.get<float>()); });
        std::printf("%-22s %6lld %10s %14.1f %14.1f\n",
                    (std::string(sh.name) + " " + std::to_string(sh.out) + "x" + std::to_string(sh.in)).c_str(),
                    (long long)m, f->name, decode_ms * 1e3, tc_ms * 1e3);
        json.crossover.push_back(Json::record(
            "{\"shape\": \"%s\", \"m\": %lld, \"format\": \"%s\", \"decode_us\": %.2f, \"tensor_core_us\": %.2f}", sh.name,
            (long long)m, f->name, decode_ms * 1e3, tc_ms * 1e3));
      }
    }

  // ---- the MoE layer: route, 256 routed experts top-6 + 1 shared, combine
  const int64_t experts = 256, k = 6, dim = 4096, inter = 2048;
  const float limit = 10.0f;
  std::printf("\n%-8s %7s %-8s %12s %9s %8s %12s %9s\n", "MoE", "tokens", "path", "us", "TFLOP/s", "of rate",
              "weight bytes", "of copy");
  for (const Format* f : {&kNvfp4, &kMxfp4}) {
    std::vector<DeviceWeight> w1, w2, w3;
    std::vector<WeightRef> r1, r2, r3;
    for (int64_t e = 0; e <= experts; ++e) {  // the last one is the shared expert
      w1.push_back(make_weight(*f, inter, dim, 100 + uint64_t(e), s));
      w3.push_back(make_weight(*f, inter, dim, 1100 + uint64_t(e), s));
      w2.push_back(make_weight(*f, dim, inter, 2100 + uint64_t(e), s));
      r1.push_back(w1.back().ref);
      r2.push_back(w2.back().ref);
      r3.push_back(w3.back().ref);
    }
    const size_t expert_bytes = w1[0].bytes() + w2[0].bytes() + w3[0].bytes();
    DeviceBuffer t1(size_t(experts) * sizeof(WeightRef)), t2(t1.bytes()), t3(t1.bytes());
    TETRA_CUDA_CHECK(cudaMemcpyAsync(t1.get(), r1.data(), t1.bytes(), cudaMemcpyHostToDevice, s));
    TETRA_CUDA_CHECK(cudaMemcpyAsync(t2.get(), r2.data(), t2.bytes(), cudaMemcpyHostToDevice, s));
    TETRA_CUDA_CHECK(cudaMemcpyAsync(t3.get(), r3.data(), t3.bytes(), cudaMemcpyHostToDevice, s));
    const std::vector<float> ones(size_t(2 * experts), 1.0f);
    DeviceBuffer up_alpha(ones.size() * 4);
    TETRA_CUDA_CHECK(cudaMemcpyAsync(up_alpha.get(), ones.data(), up_alpha.bytes(), cudaMemcpyHostToDevice, s));
    TETRA_CUDA_CHECK(cudaStreamSynchronize(s));
    // every routed expert has one layout: the tensor-core decode rows and the fused GEMMs apply
    const tetra::cuda::ExpertLayout layout{r1[0], r2[0], true, experts};
    const tetra::cuda::GroupedExperts grouped{.experts = experts,
                                              .dim = dim,
                                              .inter = inter,
                                              .w1 = r1.data(),
                                              .w2 = r2.data(),
                                              .w3 = r3.data(),
                                              .device_w1 = t1.get<WeightRef>(),
                                              .device_w2 = t2.get<WeightRef>(),
                                              .device_w3 = t3.get<WeightRef>(),
                                              .layout = layout,
                                              .w2_alpha = ones.data(),
                                              .up_alpha = up_alpha.get<float>()};
    tetra::cuda::RouteParams route;
    route.experts = experts;
    route.k = k;
    route.route_scale = 1.5f;
    for (int64_t n : {1, 2, 4, 8, 16, 32, 64, 128, 256, 2048, 8192}) {
      DeviceBuffer x(size_t(n * dim) * 4), logits(size_t(n * experts) * 4), weights(size_t(n * k) * 4),
          selected(size_t(n * k) * 4), routed(size_t(n * dim) * 4), out(size_t(n * dim) * 4),
          gate(size_t(n * inter) * 4), up(size_t(n * inter) * 4), h(size_t(n * inter) * 4), shared(size_t(n * dim) * 4),
          scratch(n <= 256 ? size_t(tetra::cuda::routed_experts_scratch_floats(n, k, dim, inter)) * 4 : 0);
      fill_floats(x.get(), size_t(n * dim), 9, 1.0f, s);
      fill_floats(logits.get(), size_t(n * experts), 10, 2.0f, s);
      auto shared_linear = [&](const WeightRef& w, const float* in, float* o) {
        if (n >= 65)
          gemm.linear(w, 1.0f, in, n, 1, true, o);
        else
          tetra::cuda::linear(w, in, n, 1, true, o, s);
      };
      auto layer = [&](bool grouped_path) {
        tetra::cuda::route(logits.get<float>(), nullptr, nullptr, nullptr, n, route, weights.get<float>(),
                           selected.get<int32_t>(), s);
        if (grouped_path) {
          tetra::cuda::grouped_experts(gemm, grouped, x.get<float>(), n, weights.get<float>(), selected.get<int32_t>(), k,
                                       limit, true, routed.get<float>());
        } else {
          tetra::cuda::routed_experts(x.get<float>(), n, dim, inter, weights.get<float>(), selected.get<int32_t>(), k,
                                      t1.get<WeightRef>(), t2.get<WeightRef>(), t3.get<WeightRef>(), layout, limit, true,
                                      scratch.get<float>(), routed.get<float>(), s);
        }
        shared_linear(r1[size_t(experts)], x.get<float>(), gate.get<float>());
        shared_linear(r3[size_t(experts)], x.get<float>(), up.get<float>());
        tetra::cuda::swiglu(gate.get<float>(), up.get<float>(), n * inter, limit, h.get<float>(), s);
        shared_linear(r2[size_t(experts)], h.get<float>(), shared.get<float>());
        tetra::cuda::add(routed.get<float>(), shared.get<float>(), n * dim, out.get<float>(), s);
      };
      // Distinct experts this routing touches: the bytes a decode-sized step must read.
      layer(true);
      TETRA_CUDA_CHECK(cudaStreamSynchronize(s));  // s does not order the legacy stream's copy below
      std::vector<int32_t> sel(size_t(n * k));
      TETRA_CUDA_CHECK(cudaMemcpy(sel.data(), selected.get(), sel.size() * 4, cudaMemcpyDeviceToHost));
      std::sort(sel.begin(), sel.end());
      const int64_t used = int64_t(std::unique(sel.begin(), sel.end()) - sel.begin()) + 1;  // + shared
      // The layer by either path, and the grouped path's routed experts alone (prefill sizes).
      struct Path {
        const char* name;
        bool layer, grouped;
      };
      for (const Path& p : {Path{"per-pair", true, false}, Path{"grouped", true, true}, Path{"routed", false, true}}) {
        if (!p.grouped && n > 256) continue;  // the per-pair path rereads every expert per pair
        if (!p.layer && n < 64) continue;
        const int64_t slots = p.layer ? k + 1 : k, experts_read = p.layer ? used : used - 1;
        const double bytes = double(experts_read) * double(expert_bytes);
        const double flop = 2.0 * double(n) * double(slots) * 3.0 * double(dim) * double(inter);
        const double ms = median_ms(s, n >= 2048 || (!p.grouped && n >= 64) ? 5 : 20, [&] {
          if (p.layer)
            layer(p.grouped);
          else
            tetra::cuda::grouped_experts(gemm, grouped, x.get<float>(), n, weights.get<float>(), selected.get<int32_t>(),
                                         k, limit, true, routed.get<float>());
        });
        const double tflops = flop / (ms * 1e9), gbs = bytes / (ms * 1e6);
        std::printf("%-8s %7lld %-8s %12.1f %9.1f %7.1f%% %11.0fM %8.0f%%\n", f->name, (long long)n, p.name, ms * 1e3, tflops,
                    100.0 * tflops / matrix_tflops, bytes / 1e6, 100.0 * gbs / copy_gbs);
        json.moe.push_back(Json::record(
            "{\"format\": \"%s\", \"tokens\": %lld, \"path\": \"%s\", \"us\": %.2f, \"tflops\": %.2f, "
            "\"of_matrix_rate\": %.4f, \"weight_bytes\": %.0f, \"of_copy_bandwidth\": %.4f}",
            f->name, (long long)n, p.name, ms * 1e3, tflops, tflops / matrix_tflops, bytes, gbs / copy_gbs));
      }
    }
  }

  if (!json_path.empty()) {
    std::unique_ptr<FILE, int (*)(FILE*)> out(std::fopen(json_path.c_str(), "w"), &std::fclose);
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 1;
    }
    std::fprintf(out.get(),
                 "{\n  \"bench\": \"tetra_cuda_prefill_bench\", \"gpu\": \"%s\", \"driver\": %d, \"date\": \"%s\",\n"
                 "  \"copy_gbs\": %.1f, \"bf16_matrix_tflops\": %.1f,\n  \"linear\": [%s],\n  \"crossover\": [%s],\n"
                 "  \"moe\": [%s]\n}\n",
                 prop.name, driver, date, copy_gbs, matrix_tflops, join(json.linear).c_str(), join(json.crossover).c_str(),
                 join(json.moe).c_str());
  }
  return 0;
}

int main(int argc, char** argv) {
  return report_errors("tetra_cuda_prefill_bench", [&] { return run(argc, argv); });
}
