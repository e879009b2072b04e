// Decode-shaped linear layers of a model (V4-Flash by default) on the CUDA backend's kernels, in
// every weight format, at M = 1, 4, 16, 64 tokens: µs per call, weight bytes/s against the
// measured device copy (read + write), and cuBLAS's bf16 GEMM on the same shapes in the same
// run; at M = 1 also with the split-K forced to 2, 4, 8 warps. Then the routed experts of one MoE
// layer, one launch over all (token, slot) pairs; up to 4 tokens also with 1..16 warps per block.
// Weights rotate through copies beyond the L2, as in a real decode step; inputs are random.
//   tetra_cuda_linear_bench [--config DIR] [--json FILE] [--layer TEXT] [--format NAME] [--tokens M]
//                           [--iterations N] [--timing eager|graph]
// --layer, --format and --tokens keep only the layers whose name contains TEXT (the routed
// experts: "routed"), one format, one M; --iterations sets the calls per timing round (20), e.g.
// 1 under a profiler (tools/profile_linear.sh). --timing graph captures each round's calls (ours
// and cuBLAS's) in a CUDA graph and times its replay, as a decode step runs them: no host launch
// cost between calls, which in the default eager timing bounds small matrices at ~5 µs a call.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cublas_handle.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_event.h"
#include "backend/cuda/cuda_graph.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/linear.h"
#include "backend/cuda/moe.h"
#include "core/error.h"
#include "model/config.h"

namespace {
using tetra::DType;
using tetra::WeightFormat;
using tetra::cuda::DeviceBuffer;
using tetra::cuda::WeightRef;

struct Layer {
  std::string name;
  int64_t out, in, groups;
  bool f32_input;   // the head and the router read f32 activations (three bf16 parts)
  bool bf16_only;   // never quantized in a checkpoint
};

struct Format {
  const char* name;
  WeightFormat format;
  DType weight_dtype, scale_dtype;
  double bytes_per_weight;
  int64_t scale_block_rows, scale_block_cols;  // one scale byte per rows×cols block
  uint8_t scale_byte;                          // a scale of 1
};

const Format kFormats[] = {
    {"bf16", WeightFormat::dense, DType::bf16, DType::f32, 2.0, 0, 0, 0},
    {"fp8_block", WeightFormat::fp8_block, DType::f8_e4m3, DType::f8_e8m0, 1.0, 128, 128, 127},
    {"mxfp4", WeightFormat::mxfp4, DType::u8, DType::f8_e8m0, 0.5, 1, 32, 127},
    {"nvfp4", WeightFormat::nvfp4, DType::u8, DType::f8_e4m3, 0.5, 1, 16, 0x38},
};

// Where the timed calls run: eagerly on the legacy stream, or captured per round into a CUDA
// graph on a stream of their own and replayed.
struct Timing {
  bool graph = false;
  std::shared_ptr<tetra::cuda::CudaStream> own;  // graph timing only
  cudaStream_t stream() const { return own ? own->get() : nullptr; }
};

// Median over 5 rounds of the mean milliseconds per call of f over `iterations` calls (after one
// call not timed; with graph timing, after one replay not timed of each round's graph).
template <class F>
float time_ms(const Timing& t, int iterations, F&& f) {
  tetra::cuda::CudaEvent start, stop;
  f(0);
  TETRA_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> rounds;
  for (int round = 0; round < 5; ++round) {
    std::unique_ptr<tetra::cuda::CudaGraph> graph;  // the round's calls, when timed as a graph
    if (t.graph) {
      graph = std::make_unique<tetra::cuda::CudaGraph>(t.own, nullptr, [&] {
        for (int i = 0; i < iterations; ++i) f(round * iterations + i);
      });
      graph->launch();
      TETRA_CUDA_CHECK(cudaStreamSynchronize(t.stream()));
    }
    TETRA_CUDA_CHECK(cudaEventRecord(start.get(), t.stream()));
    if (graph) graph->launch();
    else
      for (int i = 0; i < iterations; ++i) f(round * iterations + i);
    TETRA_CUDA_CHECK(cudaEventRecord(stop.get(), t.stream()));
    TETRA_CUDA_CHECK(cudaEventSynchronize(stop.get()));
    float ms = 0;
    TETRA_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    rounds.push_back(ms / float(iterations));
  }
  TETRA_CUDA_CHECK(cudaGetLastError());
  std::sort(rounds.begin(), rounds.end());
  return rounds[2];
}

// Random bytes valid for the format (no NaN codes), uploaded once and copied on the device.
class Filler {
 public:
  explicit Filler(std::mt19937& rng) : pattern_(size_t(64) << 20) {
    std::vector<uint8_t> host(pattern_.bytes());
    for (auto& b : host) b = uint8_t(rng());
    TETRA_CUDA_CHECK(cudaMemcpy(pattern_.get(), host.data(), host.size(), cudaMemcpyHostToDevice));
    for (auto& b : host) b = uint8_t(b == 0x7F ? 0x7E : b == 0xFF ? 0xFE : b);  // e4m3 NaNs
    fp8_ = DeviceBuffer(host.size());
    TETRA_CUDA_CHECK(cudaMemcpy(fp8_.get(), host.data(), host.size(), cudaMemcpyHostToDevice));
    for (size_t i = 1; i < host.size(); i += 2) host[i] = uint8_t(0x38 + (host[i] & 0x07) + (host[i] & 0x80));  // bf16 ±2^-7..2^0
    bf16_ = DeviceBuffer(host.size());
    TETRA_CUDA_CHECK(cudaMemcpy(bf16_.get(), host.data(), host.size(), cudaMemcpyHostToDevice));
  }
  void fill(void* dst, size_t bytes, WeightFormat f) const {
    const DeviceBuffer& src = f == WeightFormat::dense ? bf16_ : f == WeightFormat::fp8_block ? fp8_ : pattern_;
    for (size_t at = 0; at < bytes; at += src.bytes())
      TETRA_CUDA_CHECK(cudaMemcpy(static_cast<uint8_t*>(dst) + at, src.get(), std::min(src.bytes(), bytes - at),
                                  cudaMemcpyDeviceToDevice));
  }

 private:
  DeviceBuffer pattern_, fp8_, bf16_;
};

// One format's copies of a matrix, rotating beyond the L2.
struct Weights {
  std::vector<DeviceBuffer> copies;
  DeviceBuffer scale;
  size_t weight_bytes = 0, scale_bytes = 0;

  // copies = 0: enough to exceed the L2 several times.
  Weights(const Filler& filler, const Format& f, int64_t out, int64_t in, size_t n = 0) {
    weight_bytes = size_t(double(out * in) * f.bytes_per_weight);
    scale_bytes = f.scale_block_cols ? size_t((out + f.scale_block_rows - 1) / f.scale_block_rows *
                                              ((in + f.scale_block_cols - 1) / f.scale_block_cols))
                                     : 0;
    if (n == 0) n = std::max<size_t>(2, ((size_t(400) << 20) + weight_bytes - 1) / weight_bytes);
    for (size_t c = 0; c < n; ++c) {
      copies.emplace_back(weight_bytes);
      filler.fill(copies.back().get(), weight_bytes, f.format);
    }
    scale = DeviceBuffer(std::max<size_t>(scale_bytes, 1));
    TETRA_CUDA_CHECK(cudaMemset(scale.get(), f.scale_byte, scale.bytes()));
  }
  WeightRef ref(const Format& f, int64_t out, int64_t in, int i) const {
    return {f.format, f.weight_dtype, f.scale_dtype, copies[size_t(i) % copies.size()].get(), scale.get(), 1.0f, out, in};
  }
};

DeviceBuffer random_floats(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> host(n);
  for (float& v : host) v = d(rng);
  DeviceBuffer b(n * sizeof(float));
  TETRA_CUDA_CHECK(cudaMemcpy(b.get(), host.data(), b.bytes(), cudaMemcpyHostToDevice));
  return b;
}

std::vector<Layer> model_layers(const tetra::ModelConfig& c) {
  const int64_t q = c.n_heads * c.head_dim;
  return {
      {"attn.wq_a", c.q_lora_rank, c.dim, 1, false, false},
      {"attn.wq_b", q, c.q_lora_rank, 1, false, false},
      {"attn.wkv", c.head_dim, c.dim, 1, false, false},
      {"attn.wo_a (grouped)", c.o_groups * c.o_lora_rank, q / c.o_groups, c.o_groups, false, false},
      {"attn.wo_b", c.dim, c.o_groups * c.o_lora_rank, 1, false, false},
      {"compressor.wkv|wgate r4", 2 * c.head_dim, c.dim, 1, false, false},
      {"compressor.wkv|wgate r128", c.head_dim, c.dim, 1, false, false},
      {"indexer.wq_b", c.index_n_heads * c.index_head_dim, c.q_lora_rank, 1, false, false},
      {"indexer.weights_proj", c.index_n_heads, c.dim, 1, false, false},
      {"indexer.compressor", 2 * c.index_head_dim, c.dim, 1, false, false},
      {"ffn.gate (router, f32)", c.n_routed_experts, c.dim, 1, true, true},
      {"expert w1|w3", c.moe_inter_dim, c.dim, 1, false, false},
      {"expert w2", c.dim, c.moe_inter_dim, 1, false, false},
      {"head (f32)", c.vocab_size, c.dim, 1, true, true},
  };
}

struct Row {
  std::string layer, format;
  int64_t m;
  double mb, us, gbs, fraction, cublas_us;
};

// The forced-split columns: run(split) in µs for each split, 5 characters and a space each.
template <class Run>
std::string split_columns(Run&& run, std::initializer_list<int> splits) {
  std::string columns;
  for (int split : splits) columns += std::to_string(run(split)).substr(0, 5) + " ";
  return columns;
}

int64_t positive_count(const std::string& option, const std::string& value) {
  try {
    size_t used = 0;
    const long long v = std::stoll(value, &used);
    if (used == value.size() && v > 0) return v;
  } catch (const std::exception&) {
  }
  tetra::usage_error("tetra_cuda_linear_bench: ", option, " needs a positive integer, not '", value, "'");
}

int run(int argc, char** argv) {
  std::string config_dir = "tests/data/v4_flash", json_path, layer_filter, format_filter;
  int64_t only_tokens = 0;
  int iterations = 20;
  Timing timing;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) tetra::usage_error("tetra_cuda_linear_bench: ", argv[i], " needs a value");
    const std::string option = argv[i], value = argv[i + 1];
    if (option == "--config") config_dir = value;
    else if (option == "--json") json_path = value;
    else if (option == "--layer") layer_filter = value;
    else if (option == "--format") format_filter = value;
    else if (option == "--tokens") only_tokens = positive_count(option, value);
    else if (option == "--iterations") iterations = int(std::min<int64_t>(positive_count(option, value), 1000));
    else if (option == "--timing" && (value == "eager" || value == "graph")) timing.graph = value == "graph";
    else if (option == "--timing")
      tetra::usage_error("tetra_cuda_linear_bench: --timing is eager or graph, not '", value, "'");
    else tetra::usage_error("tetra_cuda_linear_bench: unknown option ", option);
  }
  const tetra::ModelConfig config = tetra::load_model_config(config_dir);
  if (timing.graph) timing.own = std::make_shared<tetra::cuda::CudaStream>();
  const Timing eager;  // the copy ceiling: one call a round either way
  cudaDeviceProp prop{};
  TETRA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));

  const size_t copy_bytes = size_t(1) << 30;
  DeviceBuffer a(copy_bytes), b(copy_bytes);
  const float copy_ms = time_ms(eager, 10, [&](int) {
    TETRA_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), copy_bytes, cudaMemcpyDeviceToDevice));
  });
  const double copy_gbs = 2.0 * double(copy_bytes) / (copy_ms * 1e6);
  std::printf("%s, %d SMs; device copy %.0f GB/s (read + write); %s timing\n\n", prop.name, prop.multiProcessorCount,
              copy_gbs, timing.graph ? "graph" : "eager");

  std::mt19937 rng(1);
  const Filler filler(rng);
  const tetra::cuda::CublasHandle cublas(timing.stream());  // the timed calls' stream
  const int64_t ms_list[] = {1, 4, 16, 64};
  std::vector<Row> rows;
  std::printf("%-26s %-9s %7s %3s %9s %8s %6s %10s %7s  %s\n", "layer [out x in]", "format", "MB", "M", "us", "GB/s", "copy",
              "cuBLAS us", "speedup", "M=1 split 2/4/8 us");
  auto keep_tokens = [&](int64_t m) { return only_tokens == 0 || m == only_tokens; };
  auto keep_format = [&](const Format& f) { return format_filter.empty() || format_filter == f.name; };
  for (const Layer& l : model_layers(config)) {
    if (l.name.find(layer_filter) == std::string::npos) continue;
    const int64_t k_in = l.groups * l.in;  // activation width
    std::vector<float> peer_us;
    {  // cuBLAS bf16 on the same shape (for grouped layers: one GEMM per group, batched)
      const Weights w(filler, kFormats[0], l.out, l.in);
      for (int64_t m : ms_list) {
        if (!keep_tokens(m)) {
          peer_us.push_back(0);
          continue;
        }
        DeviceBuffer xb(size_t(m * k_in) * 2), y(size_t(m * l.out) * sizeof(float));
        filler.fill(xb.get(), xb.bytes(), WeightFormat::dense);
        const float alpha = 1, beta = 0;
        const int64_t per = l.out / l.groups;
        peer_us.push_back(1e3f * time_ms(timing, iterations, [&](int i) {
          const auto* wp = static_cast<const uint8_t*>(w.copies[size_t(i) % w.copies.size()].get());
          cublasGemmStridedBatchedEx(cublas.get(), CUBLAS_OP_T, CUBLAS_OP_N, int(per), int(m), int(l.in), &alpha, wp,
                                     CUDA_R_16BF, int(l.in), per * l.in, xb.get(), CUDA_R_16BF, int(k_in), l.in, &beta,
                                     y.get(), CUDA_R_32F, int(l.out), per, int(l.groups), CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT);
        }));
      }
    }
    for (const Format& f : kFormats) {
      if ((l.bf16_only && f.format != WeightFormat::dense) || !keep_format(f)) continue;
      const Weights w(filler, f, l.out, l.in);
      const double mb = double(w.weight_bytes + w.scale_bytes) / 1e6;
      for (size_t mi = 0; mi < std::size(ms_list); ++mi) {
        const int64_t m = ms_list[mi];
        if (!keep_tokens(m)) continue;
        DeviceBuffer x = random_floats(size_t(m * k_in), rng), y(size_t(m * l.out) * sizeof(float));
        auto run = [&](int split) {
          return 1e3f * time_ms(timing, iterations, [&](int i) {
            tetra::cuda::linear(w.ref(f, l.out, l.in, i), x.get<float>(), m, l.groups, !l.f32_input, y.get<float>(),
                                timing.stream(), split);
          });
        };
        const double us = run(0);
        const std::string splits = m == 1 ? split_columns(run, {2, 4, 8}) : "";
        const double gbs = mb * 1e3 / us;
        rows.push_back({l.name, f.name, m, mb, us, gbs, gbs / copy_gbs, peer_us[mi]});
        char label[64];
        std::snprintf(label, sizeof label, "%s [%lldx%lld]", l.name.c_str(), (long long)l.out, (long long)l.in);
        std::printf("%-26s %-9s %7.1f %3lld %9.1f %8.0f %5.0f%% %10.1f %6.2fx  %s\n", label, f.name, mb, (long long)m, us, gbs,
                    100.0 * gbs / copy_gbs, peer_us[mi], peer_us[mi] / us, splits.c_str());
      }
    }
  }

  // Routed experts of one MoE layer: n tokens × k slots in one launch each for w1/w3 and w2.
  const bool experts = std::string("routed experts").find(layer_filter) != std::string::npos;
  if (experts) {
    std::printf("\nrouted experts (%lld of %lld per token, [%lld x %lld] w1/w3, w2), one launch over all pairs\n",
                (long long)config.n_activated_experts, (long long)config.n_routed_experts,
                (long long)config.moe_inter_dim, (long long)config.dim);
    std::printf("%-9s %3s %9s %8s %6s %12s  %s\n", "format", "n", "us", "GB/s", "copy", "experts read",
                "n<=4: split 1/2/4/8/16 us");
  }
  const int64_t E = config.n_routed_experts, K = config.n_activated_experts, D = config.dim, I = config.moe_inter_dim;
  for (const Format& f : kFormats) {
    if (!experts || !keep_format(f)) continue;
    std::vector<Weights> w1, w2, w3;
    for (int64_t e = 0; e < E; ++e) {
      w1.emplace_back(filler, f, I, D, 1);  // 256 experts already exceed the L2
      w2.emplace_back(filler, f, D, I, 1);
      w3.emplace_back(filler, f, I, D, 1);
    }
    auto table = [&](std::vector<Weights>& ws, int64_t out, int64_t in) {
      std::vector<WeightRef> refs;
      for (const Weights& w : ws) refs.push_back(w.ref(f, out, in, 0));
      DeviceBuffer t(refs.size() * sizeof(WeightRef));
      TETRA_CUDA_CHECK(cudaMemcpy(t.get(), refs.data(), t.bytes(), cudaMemcpyHostToDevice));
      return t;
    };
    const DeviceBuffer t1 = table(w1, I, D), t2 = table(w2, D, I), t3 = table(w3, I, D);
    const tetra::cuda::ExpertLayout layout{w1[0].ref(f, I, D, 0), w2[0].ref(f, D, I, 0), true, E};
    const double expert_mb = double(3 * (w1[0].weight_bytes + w1[0].scale_bytes)) / 1e6;
    for (int64_t n : ms_list) {
      if (!keep_tokens(n)) continue;
      // 8 selections that rotate, distinct experts within a token
      constexpr int kSelections = 8;
      std::vector<DeviceBuffer> sel;
      double distinct = 0;
      for (int s = 0; s < kSelections; ++s) {
        std::vector<int32_t> ids(size_t(n * K));
        std::vector<bool> used(static_cast<size_t>(E));
        for (int64_t t = 0; t < n; ++t) {
          std::vector<int32_t> perm(static_cast<size_t>(E));
          for (int64_t e = 0; e < E; ++e) perm[size_t(e)] = int32_t(e);
          std::shuffle(perm.begin(), perm.end(), rng);
          for (int64_t j = 0; j < K; ++j) used[size_t(ids[size_t(t * K + j)] = perm[size_t(j)])] = true;
        }
        distinct += double(std::count(used.begin(), used.end(), true)) / kSelections;
        sel.emplace_back(ids.size() * sizeof(int32_t));
        TETRA_CUDA_CHECK(cudaMemcpy(sel.back().get(), ids.data(), sel.back().bytes(), cudaMemcpyHostToDevice));
      }
      DeviceBuffer x = random_floats(size_t(n * D), rng), rw = random_floats(size_t(n * K), rng);
      DeviceBuffer scratch(size_t(tetra::cuda::routed_experts_scratch_floats(n, K, D, I)) * sizeof(float)),
          out(size_t(n * D) * sizeof(float));
      // split 0: the kernels' own choice; otherwise forced warps per block
      auto run = [&](int split) {
        return 1e3 * time_ms(timing, iterations, [&](int i) {
          const int32_t* selected = sel[size_t(i % kSelections)].get<int32_t>();
          tetra::cuda::routed_experts(x.get<float>(), n, D, I, rw.get<float>(), selected, K, t1.get<WeightRef>(),
                                      t2.get<WeightRef>(), t3.get<WeightRef>(), layout, 10.0f, true, scratch.get<float>(),
                                      out.get<float>(), timing.stream(), split);
        });
      };
      const double us = run(0);
      const std::string splits = n <= 4 ? split_columns(run, {1, 2, 4, 8, 16}) : "";
      const double gbs = distinct * expert_mb * 1e3 / us;
      std::printf("%-9s %3lld %9.1f %8.0f %5.0f%% %12.1f  %s\n", f.name, (long long)n, us, gbs, 100.0 * gbs / copy_gbs,
                  distinct, splits.c_str());
    }
  }

  // Summary over M = 1 rows of layers of at least 8 MB in their format; the headline over the
  // quantized formats (issue 8's "quantized GEMM"): bf16 weights move cuBLAS's own bytes, and
  // their figures stay in per_format.
  double min_fraction = 1e9, min_speedup = 1e9;
  std::string per_format;
  for (const Format& f : kFormats) {
    double fr = 1e9, sp = 1e9;
    for (const Row& r : rows)
      if (r.m == 1 && r.mb >= 8.0 && r.format == f.name) {
        fr = std::min(fr, r.fraction);
        sp = std::min(sp, r.cublas_us / r.us);
      }
    if (fr > 1e8) continue;
    if (f.format != WeightFormat::dense) {
      min_fraction = std::min(min_fraction, fr);
      min_speedup = std::min(min_speedup, sp);
    }
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s\"%s\": {\"m1_min_bw_fraction\": %.3f, \"m1_min_speedup_vs_cublas_bf16\": %.3f}",
                  per_format.empty() ? "" : ", ", f.name, fr, sp);
    per_format += buf;
    std::printf("%s M=1, layers >= 8 MB: min bandwidth fraction %.3f, min speedup vs cuBLAS bf16 %.2fx\n", f.name, fr, sp);
  }
  // No quantized row of 8 MB or more (a --layer or --format choice that leaves none): the headline is
  // not measured, and says so (null in the JSON) rather than printing the search's starting value.
  const bool measured = min_fraction < 1e8;
  const auto figure = [&](double v, const char* absent) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3f", v);
    return measured ? std::string(text) : std::string(absent);
  };
  const std::string fraction_text = figure(min_fraction, "none"), speedup_text = figure(min_speedup, "none");
  std::printf("SUMMARY gemm_m1_min_bw_fraction=%s gemm_m1_min_speedup_vs_cublas_bf16=%s copy_gbs=%.0f%s\n",
              fraction_text.c_str(), speedup_text.c_str(), copy_gbs,
              measured ? "" : " (no quantized layer of 8 MB or more was measured at M = 1)");
  if (!json_path.empty()) {
    FILE* out = std::fopen(json_path.c_str(), "w");
    if (!out) tetra::runtime_error("cannot write ", json_path);
    const std::string fraction_json = figure(min_fraction, "null"), speedup_json = figure(min_speedup, "null");
    std::fprintf(out, "{\"gpu\": \"%s\", \"timing\": \"%s\", \"copy_gbs\": %.0f, \"gemm_m1_min_bw_fraction\": %s,\n",
                 prop.name, timing.graph ? "graph" : "eager", copy_gbs, fraction_json.c_str());
    std::fprintf(out, " \"gemm_m1_min_speedup_vs_cublas_bf16\": %s, \"per_format\": {%s},\n", speedup_json.c_str(),
                 per_format.c_str());
    const std::string scope =
        std::string("M = 1, layers of 8 MB or more, the quantized formats (fp8_block, mxfp4, nvfp4); bf16 in per_format; ") +
        (timing.graph ? "graph timing: each round's calls (and cuBLAS's) replayed as one CUDA graph, as a decode step runs them"
                      : "eager timing: each call launched from the host, which bounds a call at ~5 us");
    std::fprintf(out,
                 " \"notes\": {\"gemm_m1_min_bw_fraction\": \"%s\", \"gemm_m1_min_speedup_vs_cublas_bf16\": \"%s\"},\n"
                 " \"rows\": [\n",
                 scope.c_str(), scope.c_str());
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::fprintf(out,
                   "  {\"layer\": \"%s\", \"format\": \"%s\", \"m\": %lld, \"mb\": %.2f, \"us\": %.2f, \"gbs\": %.0f, "
                   "\"fraction\": %.3f, \"cublas_bf16_us\": %.2f}%s\n",
                   r.layer.c_str(), r.format.c_str(), (long long)r.m, r.mb, r.us, r.gbs, r.fraction, r.cublas_us,
                   i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(out, " ]}\n");
    std::fclose(out);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // bad options and CUDA errors: the message, not an abort
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
