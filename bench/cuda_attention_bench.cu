// The attention kernels (src/backend/cuda/attention.cu) at V4-Flash geometry: 64 query heads
// sharing one 512-dim key (the last 64 dims rope), window 128, fp8 KV rows (584 bytes) in paged
// blocks of 64 rows, each layer kind: sliding window only (128 keys), CSA (the window + 512
// picked entries), HCA (the window + every finished entry, ctx/128):
//   - decode: 1 and 32 sequences at 4k, 64k and 1M tokens of context, the split kernel (what the
//     backend runs for short runs), beside the exact f32 kernel (the former kernel: the baseline
//     and the reference, as a relative difference of the outputs);
//   - prefill: 8192 rows of one sequence from position 0, the whole-list kernel.
// Ceilings measured in the same run: the device copy bandwidth (read + write) and cuBLAS bf16
// 8192³. Decode reports its bytes (keys read, q read, output written) over the copy bandwidth;
// prefill its FLOPs (Q·Kᵀ and P·K over every row's keys) over the matrix rate. Times are medians
// of event pairs, the L2 flushed before each call (the keys come from HBM, as in a real step).
// Usage: tetra_cuda_attention_bench [--json FILE] (the decode points and attn_1m_bw_fraction)
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cublas_handle.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_event.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/paged.h"
#include "json_option.h"
#include "report_errors.h"

namespace {
using namespace tetra::cuda;

constexpr int64_t kHeads = 64, kDim = 512, kRope = 64, kNope = kDim - kRope, kWindow = 128, kTopk = 512;
constexpr int64_t kRowBytes = kNope + 2 * kRope + 8;  // e4m3 codes, bf16 rope dims, a scale per 64 (padded)
constexpr int64_t kRowsPerBlock = 64;

enum class Layer { window, csa, hca };
const char* layer_name(Layer l) { return l == Layer::window ? "window" : l == Layer::csa ? "CSA" : "HCA"; }
int64_t ratio_of(Layer l) { return l == Layer::csa ? 4 : l == Layer::hca ? 128 : 0; }

__device__ uint32_t hash(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return uint32_t(x ^ (x >> 33));
}

// Random fp8_kv rows: e4m3 codes (no NaN), bf16 rope values in [-2, 2), scales 2^-3 .. 2^0.
__global__ void fill_kv_rows_kernel(uint8_t* rows, int64_t count, uint32_t seed) {
  const int64_t units = kRowBytes / 2, i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count * units) return;
  const int64_t u = i % units;
  const uint32_t h = hash((uint64_t(seed) << 40) ^ uint64_t(i));
  uint16_t v;
  if (2 * u < kNope) {
    uint32_t lo = h & 0xFF, hi = (h >> 8) & 0xFF;
    if ((lo & 0x7F) == 0x7F) lo ^= 1;
    if ((hi & 0x7F) == 0x7F) hi ^= 1;
    v = uint16_t(lo | hi << 8);
  } else if (2 * u < kNope + 2 * kRope) {
    const float x = float(h) * 0x1p-30f - 2.0f;
    v = uint16_t(__float_as_uint(x) >> 16);
  } else {
    v = uint16_t((124 + (h & 3)) | (124 + ((h >> 2) & 3)) << 8);
  }
  reinterpret_cast<uint16_t*>(rows)[i] = v;
}
void fill_kv_rows(const DeviceBuffer& b, int64_t count, uint32_t seed, cudaStream_t s) {
  const int64_t n = count * (kRowBytes / 2);
  fill_kv_rows_kernel<<<unsigned((n + 255) / 256), 256, 0, s>>>(b.get<uint8_t>(), count, seed);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

// Values uniform in [-sqrt(3), sqrt(3)): variance 1, like the model's normalized q.
__global__ void fill_floats_kernel(float* out, int64_t n, uint32_t seed) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = (float(hash((uint64_t(seed) << 40) ^ uint64_t(i))) * 0x1p-32f * 2.0f - 1.0f) * 1.7320508f;
}
void fill_floats(const DeviceBuffer& b, int64_t n, uint32_t seed, cudaStream_t s) {
  fill_floats_kernel<<<unsigned((n + 255) / 256), 256, 0, s>>>(b.get<float>(), n, seed);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

template <class T>
DeviceBuffer upload(const std::vector<T>& v) {
  DeviceBuffer b(std::max<size_t>(v.size() * sizeof(T), 1));
  TETRA_CUDA_CHECK(cudaMemcpy(b.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return b;
}
std::vector<float> download(const DeviceBuffer& b, size_t first, size_t floats) {
  std::vector<float> v(floats);
  TETRA_CUDA_CHECK(cudaMemcpy(v.data(), b.get<float>() + first, floats * sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

// Median of `iterations` event pairs around f, each after `before` (untimed).
double median_ms(cudaStream_t s, int iterations, const std::function<void()>& before, const std::function<void()>& f) {
  before();
  f();
  std::vector<double> ms;
  for (int i = 0; i < iterations; ++i) {
    const CudaEvent start, stop;
    before();
    TETRA_CUDA_CHECK(cudaEventRecord(start.get(), s));
    f();
    TETRA_CUDA_CHECK(cudaEventRecord(stop.get(), s));
    TETRA_CUDA_CHECK(cudaEventSynchronize(stop.get()));
    float t = 0;
    TETRA_CUDA_CHECK(cudaEventElapsedTime(&t, start.get(), stop.get()));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

struct Ceilings {
  double copy_gbs, matrix_tflops;
};

// One decode point's measurement (prefill points report FLOPs and are not kept).
struct DecodePoint {
  Layer layer;
  int64_t sequences, context;
  double us, bytes;
};

// `sequences` sequences of `context` tokens; the step: their last `rows` positions (decode: 1).
DecodePoint point(Layer layer, int64_t sequences, int64_t context, int64_t rows, const Ceilings& ceil, std::mt19937& rng,
                  const DeviceBuffer& flush, cudaStream_t s) {
  const int64_t ratio = ratio_of(layer), entries = ratio ? context / ratio : 0, n = sequences * rows;
  const int64_t window_blocks = kWindow / kRowsPerBlock, entry_blocks = (entries + kRowsPerBlock - 1) / kRowsPerBlock;
  const int64_t block_bytes = kRowsPerBlock * kRowBytes;
  DeviceBuffer window_pool(size_t(sequences * window_blocks * block_bytes)),
      entry_pool(size_t(std::max<int64_t>(sequences * entry_blocks, 1) * block_bytes)), step_kv(size_t(n * kRowBytes));
  fill_kv_rows(window_pool, sequences * window_blocks * kRowsPerBlock, 1, s);
  if (entries) fill_kv_rows(entry_pool, sequences * entry_blocks * kRowsPerBlock, 2, s);
  fill_kv_rows(step_kv, n, 3, s);
  std::vector<int32_t> window_tables(size_t(sequences * window_blocks)),
      entry_tables(size_t(sequences * std::max<int64_t>(entry_blocks, 1)));
  for (size_t i = 0; i < window_tables.size(); ++i) window_tables[i] = int32_t(i);
  for (size_t i = 0; i < entry_tables.size(); ++i) entry_tables[i] = int32_t(i);
  std::vector<int32_t> at(size_t(5 * n)), picks(size_t(layer == Layer::csa ? n * kTopk : 1), -1);
  int64_t keys = 0;  // keys read over the step's rows
  for (int64_t seq = 0; seq < sequences; ++seq)
    for (int64_t j = 0; j < rows; ++j) {
      const int64_t r = seq * rows + j, position = context - rows + j;
      at[size_t(r)] = int32_t(seq);
      at[size_t(n + r)] = int32_t(position);
      at[size_t(2 * n + r)] = int32_t(context - rows);
      at[size_t(3 * n + r)] = int32_t(context - 1);
      at[size_t(4 * n + r)] = int32_t(seq * rows);
      const int64_t visible = ratio ? (position + 1) / ratio : 0;
      keys += std::min<int64_t>(position + 1, kWindow) + (layer == Layer::csa ? std::min(visible, kTopk) : visible);
      if (layer == Layer::csa)
        for (int64_t k = 0; k < std::min(visible, kTopk); ++k)
          picks[size_t(r * kTopk + k)] = int32_t(rng() % uint64_t(visible));
    }
  const DeviceBuffer dwt = upload(window_tables), det = upload(entry_tables), dat = upload(at), dpicks = upload(picks);
  std::vector<float> sinks(kHeads);
  for (float& x : sinks) x = float(rng() % 1000) / 500.0f - 1.0f;
  const DeviceBuffer dsinks = upload(sinks);
  DeviceBuffer q(size_t(n * kHeads * kDim) * 4), out(size_t(n * kHeads * kDim) * 4),
      reference(size_t(n * kHeads * kDim) * 4);
  fill_floats(q, n * kHeads * kDim, 4, s);

  const PagedView window{
      window_pool.get<uint8_t>(), dwt.get<int32_t>(), window_blocks, 0, kRowsPerBlock, kRowBytes, block_bytes};
  const PagedView entry_view{entry_pool.get<uint8_t>(),
                             det.get<int32_t>(),
                             std::max<int64_t>(entry_blocks, 1),
                             0,
                             kRowsPerBlock,
                             kRowBytes,
                             block_bytes};
  const AttentionKeys kv{step_kv.get<uint8_t>(),
                         kRowBytes,
                         window,
                         entry_view,
                         layer != Layer::window,
                         layer == Layer::csa ? dpicks.get<int32_t>() : nullptr,
                         layer == Layer::csa ? kTopk : 0,
                         layer == Layer::csa ? kTopk : entry_blocks * kRowsPerBlock};
  const int32_t* a = dat.get<int32_t>();
  const StepView step{a, a + n, a + 2 * n, a + 3 * n, a + 4 * n};
  const AttentionParams p{RowFormat::fp8_kv, kHeads, kDim, kRope, kWindow, ratio, float(1 / std::sqrt(double(kDim)))};
  const bool decode = rows < 64;  // the backend's rule: runs of 64+ rows take the whole-list kernel
  DeviceBuffer scratch(size_t(decode ? attention_split_floats(n, p, kv) : 1) * 4);
  auto flush_l2 = [&] { TETRA_CUDA_CHECK(cudaMemsetAsync(flush.get(), int(rng() & 0xFF), flush.bytes(), s)); };
  const bool wgmma = attention_warpgroup_mma_supported();  // as the backend runs it
  auto run = [&](AttentionKernel kernel, int64_t begin, int64_t count, const DeviceBuffer& o) {
    paged_attention(q.get<float>(), kv, dsinks.get<float>(), step, begin, count, p, kernel, wgmma, scratch.get<float>(),
                    o.get<float>(), s);
  };
  const AttentionKernel fast = decode ? AttentionKernel::tensor_cores_split : AttentionKernel::tensor_cores;
  const double ms = median_ms(s, 20, flush_l2, [&] { run(fast, 0, n, out); });

  // the exact kernel: every row for decode, a few late rows of the prefill (all would take minutes)
  const int64_t check_begin = decode ? 0 : n - 16, check_rows = decode ? n : 16;
  const double exact_ms =
      median_ms(s, decode ? 3 : 1, flush_l2, [&] { run(AttentionKernel::exact, check_begin, check_rows, reference); });
  const size_t first = size_t(check_begin * kHeads * kDim), floats = size_t(check_rows * kHeads * kDim);
  const double difference = relative_difference(download(out, first, floats), download(reference, first, floats));
  const double us = ms * 1e3;
  const double bytes = double(keys) * kRowBytes + 2.0 * double(n * kHeads * kDim) * 4;  // keys, q read, output written
  if (decode) {
    std::printf("%-7s %3lld x %-7lld %8.1f us  %8.1f us  %6.1fx  %7.2f MB  %5.1f%% of copy  diff %.1e\n", layer_name(layer),
                (long long)sequences, (long long)context, us, exact_ms * 1e3, exact_ms / ms, bytes / 1e6,
                100 * bytes / (ms * 1e-3) / (ceil.copy_gbs * 1e9), difference);
  } else {
    const double flops = 4.0 * double(keys) * kHeads * kDim;
    std::printf("%-7s %5lld rows %9.1f us  %7.1f TFLOP/s  %5.1f%% of cuBLAS bf16  diff %.1e (last 16 rows)\n",
                layer_name(layer), (long long)n, us, flops / (ms * 1e9), 100 * flops / (ms * 1e9) / ceil.matrix_tflops,
                difference);
  }
  return {layer, sequences, context, us, bytes};
}

// The --json document: every decode point, and the headline issue 8 asks for: attention decode
// of one sequence at 1M tokens, a CSA and an HCA layer together (what a V4 layer pair reads:
// the window, the 512 picked entries, every HCA entry), over the copy bandwidth.
void write_json(const std::string& path, const std::vector<DecodePoint>& points, const Ceilings& ceil) {
  double bytes = 0, us = 0;
  for (const DecodePoint& p : points)
    if (p.sequences == 1 && p.context == (1 << 20) && p.layer != Layer::window) bytes += p.bytes, us += p.us;
  FILE* out = std::fopen(path.c_str(), "w");
  if (!out) tetra::runtime_error("cannot write ", path);
  std::fprintf(out, "{\n \"copy_gbs\": %.1f,\n \"attn_1m_bw_fraction\": %.4f,\n", ceil.copy_gbs,
               us > 0 ? bytes / (us * 1e-6) / (ceil.copy_gbs * 1e9) : 0.0);
  std::fprintf(out,
               " \"notes\": {\"attn_1m_bw_fraction\": \"tetra_cuda_attention_bench: one sequence at 1048576 tokens, a CSA "
               "and an HCA layer (window + 512 picks, window + every entry; fp8 KV rows, q read and output written): "
               "their bytes over their summed kernel times (split kernel + combine, L2 flushed) over the copy "
               "bandwidth\"},\n \"decode\": [");
  for (size_t i = 0; i < points.size(); ++i) {
    const DecodePoint& p = points[i];
    std::fprintf(out, "%s\n  {\"layer\": \"%s\", \"sequences\": %lld, \"context\": %lld, \"us\": %.2f, \"bytes\": %.0f}",
                 i ? "," : "", layer_name(p.layer), (long long)p.sequences, (long long)p.context, p.us, p.bytes);
  }
  std::fprintf(out, "\n ]\n}\n");
  std::fclose(out);
}

}  // namespace

static int run(int argc, char** argv) {
  const std::string json_path = json_option(argc, argv);
  const CudaStream stream;
  const cudaStream_t s = stream.get();
  Ceilings ceil{};
  {
    const size_t bytes = size_t(1) << 30;
    DeviceBuffer a(bytes), b(bytes);
    TETRA_CUDA_CHECK(cudaMemsetAsync(a.get(), 1, bytes, s));
    const double ms = median_ms(
        s, 10, [] {}, [&] { TETRA_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, s)); });
    ceil.copy_gbs = 2.0 * double(bytes) / (ms * 1e6);
  }
  {
    const int64_t n = 8192;
    const CublasHandle cublas(s);
    DeviceBuffer a(size_t(n * n) * 2), b(size_t(n * n) * 2), c(size_t(n * n) * 2);
    TETRA_CUDA_CHECK(cudaMemsetAsync(a.get(), 0x3C, a.bytes(), s));  // bf16 0x3C3C: about 0.011
    TETRA_CUDA_CHECK(cudaMemsetAsync(b.get(), 0x3C, b.bytes(), s));
    const float alpha = 1, beta = 0;
    const double ms = median_ms(
        s, 10, [] {},
        [&] {
          TETRA_CUBLAS_CHECK(cublasGemmEx(cublas.get(), CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(n), int(n), &alpha, a.get(),
                                          CUDA_R_16BF, int(n), b.get(), CUDA_R_16BF, int(n), &beta, c.get(), CUDA_R_16BF,
                                          int(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        });
    ceil.matrix_tflops = 2.0 * double(n * n * n) / (ms * 1e9);
  }
  std::printf("device copy %.0f GB/s (read + write), cuBLAS bf16 8192^3 %.0f TFLOP/s\n\n", ceil.copy_gbs,
              ceil.matrix_tflops);
  const DeviceBuffer flush(size_t(256) << 20);  // beyond the L2
  std::mt19937 rng(5);
  std::printf("decode  seqs x context  tensor cores  exact f32  speed-up  bytes      of copy bandwidth\n");
  std::vector<DecodePoint> decode;
  for (Layer layer : {Layer::window, Layer::csa, Layer::hca})
    for (int64_t sequences : {1, 32})
      for (int64_t context : {4096, 65536, 1 << 20})
        decode.push_back(point(layer, sequences, context, 1, ceil, rng, flush, s));
  std::printf("\nprefill (one sequence, positions 0 .. 8191)\n");
  for (Layer layer : {Layer::window, Layer::csa, Layer::hca}) point(layer, 1, 8192, 8192, ceil, rng, flush, s);
  if (!json_path.empty()) write_json(json_path, decode, ceil);
  return 0;
}

int main(int argc, char** argv) {
  return report_errors("tetra_cuda_attention_bench", [&] { return run(argc, argv); });
}
