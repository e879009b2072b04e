// Every CUDA backend op against the CPU reference op on identical inputs: bf16-input linear
// layers within 1e-2 (relative), f32 ops within 1e-4, selections (routing, indexer top-k)
// identical when the scores have no near-ties.
#include <cuda_runtime.h>

#include <array>
#include <cstring>
#include <filesystem>

#include "io/safetensors.h"
#include "support/cuda_parity.h"
#include "support/tiny_checkpoint.h"

namespace tetra {
namespace {
namespace fs = std::filesystem;
using testing::random_values;
using testing::relative_difference;

constexpr double kBf16Tolerance = 1e-2;
constexpr double kF32Tolerance = 1e-4;

struct Backends {
  std::unique_ptr<Backend> cpu = make_backend("cpu");
  std::unique_ptr<Backend> gpu = make_cuda_backend();
  std::unique_ptr<Backend> gpu_f32 = make_cuda_backend({.bf16_linear_inputs = false});
};

// The raw bytes of a CUDA backend u8 tensor (download reads only f32 and i32).
std::vector<uint8_t> device_bytes(const Tensor& t) {
  std::vector<uint8_t> bytes(static_cast<size_t>(t.numel()));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the backend's stream does not order the legacy one
  EXPECT_EQ(cudaMemcpy(bytes.data(), t.data<uint8_t>(), bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  return bytes;
}

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    TETRA_REQUIRE_GPU();
    be = std::make_unique<Backends>();
  }
  std::unique_ptr<Backends> be;
  std::mt19937 rng{7};
};

// ---- linear layers: every tensor of tiny checkpoints in every format, several batch sizes
TEST_F(CudaOps, LinearEveryFormatAndBatchSize) {
  for (auto quant : {testing::TinyQuant::bf16, testing::TinyQuant::fp8_mxfp4, testing::TinyQuant::nvfp4}) {
    const fs::path dir = fs::temp_directory_path() / ("tetra_cuda_linear_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    testing::TinyCheckpointOptions o;
    o.quant = quant;
    o.fp4_storage = DType::u8;
    testing::write_tiny_checkpoint(dir.string(), o);
    const ModelConfig config = load_model_config(dir.string());
    const TensorStore store(dir.string());
    const ModelWeights weights(config, store);
    for (const LinearWeight* w : weights.linears()) {
      const Tensor wc = be->cpu->load_linear(*w), wg = be->gpu->load_linear(*w), wf = be->gpu_f32->load_linear(*w);
      const bool grouped = w->role.ends_with("wo_a");
      const int64_t groups = grouped ? config.o_groups : 1;
      for (int64_t n : {1, 3, 8, 9, 70}) {
        const std::vector<float> x = random_values(size_t(n * groups * w->in), rng);
        auto run = [&](Backend& b, const Tensor& wt) {
          const Tensor xt = b.upload(x, {n, groups * w->in});
          return b.download(grouped ? b.grouped_linear(xt, wt, groups) : b.linear(xt, wt));
        };
        const std::vector<float> want = run(*be->cpu, wc);
        EXPECT_LT(relative_difference(run(*be->gpu, wg), want), kBf16Tolerance) << w->role << " n=" << n;
        EXPECT_LT(relative_difference(run(*be->gpu_f32, wf), want), 1e-5) << w->role << " n=" << n << " (f32)";
      }
    }
    fs::remove_all(dir);
  }
}

// Edge shapes: inputs not a multiple of the 32-value chunk, single rows and columns, f32/bf16.
TEST_F(CudaOps, LinearEdgeShapes) {
  for (DType dt : {DType::f32, DType::bf16})
    for (auto [out, in] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 7}, {130, 45}, {5, 100}, {33, 1030}}) {
      std::vector<float> wv = random_values(size_t(out * in), rng);
      std::vector<uint16_t> wb(wv.size());
      for (size_t i = 0; i < wv.size(); ++i) wv[i] = bf16_to_f32(wb[i] = f32_to_bf16(wv[i]));
      LinearWeight w;
      w.role = "edge";
      w.out = out;
      w.in = in;
      w.weight = dt == DType::f32
                     ? TensorView{DType::f32, {out, in}, reinterpret_cast<const std::byte*>(wv.data()), wv.size() * 4}
                     : TensorView{DType::bf16, {out, in}, reinterpret_cast<const std::byte*>(wb.data()), wb.size() * 2};
      for (int64_t n : {1, 2, 17}) {
        const std::vector<float> x = random_values(size_t(n * in), rng);
        auto run = [&](Backend& b) { return b.download(b.linear(b.upload(x, {n, in}), b.load_linear(w))); };
        const std::vector<float> want = run(*be->cpu);
        EXPECT_LT(relative_difference(run(*be->gpu), want), kBf16Tolerance) << out << "x" << in << " n=" << n;
        EXPECT_LT(relative_difference(run(*be->gpu_f32), want), 1e-5) << out << "x" << in << " n=" << n;
      }
    }
}

// Every tensor-core path at sizes past the tiny checkpoints': 1..70 tokens (each token-tile
// width and a second pass), split-K over many chunks, rows not a multiple of the 32-row tile,
// inputs ending in a partial chunk, grouped rows, and the scale cases: MXFP4 scales above 2
// (the two-factor path), FP8 blocks with f32 and ue8m0 scales, per-tensor FP8, NVFP4 with a
// global scale. Codes are random bytes (every fp4 code, every finite e4m3 code).
TEST_F(CudaOps, LinearQuantizedLargeShapes) {
  struct Case {
    WeightFormat format;
    DType weight_dtype, scale_dtype;
    int64_t out, in, groups;
  };
  const std::vector<Case> cases{
      {WeightFormat::dense, DType::bf16, DType::f32, 200, 1000, 1},
      {WeightFormat::fp8_block, DType::f8_e4m3, DType::f32, 300, 1040, 1},
      {WeightFormat::fp8_block, DType::f8_e8m0, DType::f8_e8m0, 256, 2048, 4},
      {WeightFormat::fp8_tensor, DType::f8_e4m3, DType::f32, 97, 512, 1},
      {WeightFormat::mxfp4, DType::u8, DType::f8_e8m0, 130, 1056, 1},
      {WeightFormat::mxfp4, DType::u8, DType::f8_e8m0, 256, 512, 8},
      {WeightFormat::nvfp4, DType::u8, DType::f8_e4m3, 200, 4096, 1},
  };
  for (const Case& c : cases) {
    const bool fp4 = c.format == WeightFormat::mxfp4 || c.format == WeightFormat::nvfp4;
    std::vector<uint8_t> codes(size_t(c.out * c.in * (c.format == WeightFormat::dense ? 2 : 1) / (fp4 ? 2 : 1)));
    std::vector<float> scales_f32;
    std::vector<uint8_t> scales_u8;
    if (c.format == WeightFormat::dense) {
      const std::vector<float> v = random_values(size_t(c.out * c.in), rng);
      for (size_t i = 0; i < v.size(); ++i) {
        const uint16_t b = f32_to_bf16(v[i]);
        std::memcpy(codes.data() + 2 * i, &b, 2);
      }
    } else {
      for (auto& b : codes) {
        b = uint8_t(rng());
        if (!fp4 && (b & 0x7F) == 0x7F) b = uint8_t(b - 1);  // e4m3 NaN
      }
    }
    switch (c.format) {
      case WeightFormat::fp8_block: {
        const size_t n = size_t((c.out + 127) / 128 * ((c.in + 127) / 128));
        if (c.scale_dtype == DType::f32) scales_f32 = random_values(n, rng, 0.01f);
        else for (size_t i = 0; i < n; ++i) scales_u8.push_back(uint8_t(118 + rng() % 16));
        break;
      }
      case WeightFormat::fp8_tensor: scales_f32 = {0.0123f}; break;
      case WeightFormat::mxfp4:  // 120..135: includes the scales above 2 (bytes above 128)
        for (int64_t i = 0; i < c.out * c.in / 32; ++i) scales_u8.push_back(uint8_t(120 + rng() % 16));
        break;
      case WeightFormat::nvfp4:
        for (int64_t i = 0; i < c.out * c.in / 16; ++i) scales_u8.push_back(uint8_t(rng() % 0x7F));  // finite e4m3
        break;
      case WeightFormat::dense: break;
    }
    LinearWeight w;
    w.role = "large";
    w.format = c.format;
    w.out = c.out;
    w.in = c.in;
    w.global_scale = c.format == WeightFormat::nvfp4 ? 0.37f : 1.0f;
    const Shape code_shape = fp4 ? Shape{c.out, c.in / 2} : Shape{c.out, c.in};
    w.weight = TensorView{c.weight_dtype, code_shape, reinterpret_cast<const std::byte*>(codes.data()), codes.size()};
    const int64_t scale_rows = c.format == WeightFormat::fp8_block ? (c.out + 127) / 128 : c.out;
    const int64_t scale_cols = c.format == WeightFormat::fp8_block ? (c.in + 127) / 128
                               : c.format == WeightFormat::mxfp4   ? c.in / 32
                                                                   : c.in / 16;
    if (!scales_f32.empty())
      w.scale = TensorView{DType::f32, c.format == WeightFormat::fp8_tensor ? Shape{1} : Shape{scale_rows, scale_cols},
                           reinterpret_cast<const std::byte*>(scales_f32.data()), scales_f32.size() * 4};
    else if (!scales_u8.empty())
      w.scale = TensorView{c.scale_dtype, {scale_rows, scale_cols}, reinterpret_cast<const std::byte*>(scales_u8.data()),
                           scales_u8.size()};
    const Tensor wc = be->cpu->load_linear(w), wg = be->gpu->load_linear(w), wf = be->gpu_f32->load_linear(w);
    for (int64_t n : {1, 4, 8, 9, 16, 17, 33, 64, 70}) {
      const std::vector<float> x = random_values(size_t(n * c.groups * c.in), rng);
      auto run = [&](Backend& b, const Tensor& wt) {
        const Tensor xt = b.upload(x, {n, c.groups * c.in});
        return b.download(c.groups > 1 ? b.grouped_linear(xt, wt, c.groups) : b.linear(xt, wt));
      };
      const std::vector<float> want = run(*be->cpu, wc);
      const std::string what = std::string(weight_format_name(c.format)) + " " + std::to_string(c.out) + "x" +
                               std::to_string(c.in) + " groups " + std::to_string(c.groups) + " n=" + std::to_string(n);
      EXPECT_LT(relative_difference(run(*be->gpu, wg), want), kBf16Tolerance) << what;
      EXPECT_LT(relative_difference(run(*be->gpu_f32, wf), want), 1e-5) << what << " (f32)";
    }
  }
}

// ---- norms, rope, element-wise
TEST_F(CudaOps, NormRopeAndElementwise) {
  for (int64_t group : {1, 7, 64, 1000}) {
    const int64_t runs = 5;
    const auto x = random_values(size_t(runs * group), rng, 3.0f);
    const auto wt = random_values(size_t(group), rng);
    for (bool with_weight : {false, true}) {
      auto op = [&](Backend& b) {
        const Tensor w = b.upload(wt, {group});
        return b.download(b.rms_norm(b.upload(x, {runs, group}), with_weight ? &w : nullptr, group, 1e-6));
      };
      EXPECT_LT(relative_difference(op(*be->gpu), op(*be->cpu)), kF32Tolerance) << "rms_norm group " << group;
    }
  }
  for (int64_t rows : {1, 6}) {
    const int64_t heads = 3, head_dim = 64, half = 8;
    const auto x = random_values(size_t(rows * heads * head_dim), rng);
    std::vector<float> freq(static_cast<size_t>(half));
    for (int64_t i = 0; i < half; ++i) freq[size_t(i)] = std::pow(10000.0f, -2.0f * float(i) / 16.0f);
    std::vector<int32_t> pos(static_cast<size_t>(rows));
    for (auto& p : pos) p = int32_t(rng() % 5000);
    for (bool inverse : {false, true}) {
      auto op = [&](Backend& b) {
        Tensor t = b.upload(x, {rows, heads * head_dim});
        b.rope(t, b.upload_i32(pos, {rows}), b.upload(freq, {half}), head_dim, inverse);
        return b.download(t);
      };
      EXPECT_LT(relative_difference(op(*be->gpu), op(*be->cpu)), kF32Tolerance) << "rope rows " << rows;
    }
  }
  const auto a = random_values(1000, rng, 4.0f), c = random_values(1000, rng, 4.0f);
  auto add = [&](Backend& b) { return b.download(b.add(b.upload(a, {10, 100}), b.upload(c, {10, 100}))); };
  EXPECT_EQ(add(*be->gpu), add(*be->cpu));
  for (double limit : {0.0, 2.0}) {
    auto sw = [&](Backend& b) { return b.download(b.swiglu(b.upload(a, {10, 100}), b.upload(c, {10, 100}), limit)); };
    EXPECT_LT(relative_difference(sw(*be->gpu), sw(*be->cpu)), 1e-6) << "swiglu limit " << limit;
  }
  const std::vector<int32_t> ids{3, 0, 9, 3};
  auto embed = [&](Backend& b) { return b.download(b.embed(b.upload(a, {10, 100}), b.upload_i32(ids, {4}))); };
  EXPECT_EQ(embed(*be->gpu), embed(*be->cpu));
}

// ---- mHC
TEST_F(CudaOps, HyperConnections) {
  ModelConfig c = testing::tiny_config();
  for (int64_t dim : {64, 300}) {
    c.dim = dim;
    const int64_t hc = c.hc_mult, flat = hc * dim, mix = (2 + hc) * hc;
    for (int64_t n : {1, 5}) {
      const auto h = random_values(size_t(n * flat), rng), fn = random_values(size_t(mix * flat), rng, 0.05f);
      const auto base = random_values(size_t(mix), rng), scale = random_values(3, rng);
      const auto y = random_values(size_t(n * dim), rng);
      auto pre = [&](Backend& b) {
        const MixWeights m = b.hc_pre(b.upload(h, {n, flat}), b.upload(fn, {mix, flat}), b.upload(base, {mix}),
                                      b.upload(scale, {3}), c);
        const Tensor out = b.hc_post(b.upload(h, {n, flat}), b.upload(y, {n, dim}), m.post, m.comb);
        return std::vector<std::vector<float>>{b.download(m.x), b.download(m.post), b.download(m.comb), b.download(out)};
      };
      const auto want = pre(*be->cpu), got = pre(*be->gpu);
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_LT(relative_difference(got[i], want[i]), kF32Tolerance) << "hc_pre/post output " << i << " dim " << dim;
      auto head = [&](Backend& b) {
        return b.download(b.hc_head(b.upload(h, {n, flat}), b.upload(std::vector<float>(fn.begin(), fn.begin() + hc * flat), {hc, flat}),
                                    b.upload(std::vector<float>(base.begin(), base.begin() + hc), {hc}),
                                    b.upload(std::vector<float>(scale.begin(), scale.begin() + 1), {1}), c));
      };
      EXPECT_LT(relative_difference(head(*be->gpu), head(*be->cpu)), kF32Tolerance) << "hc_head dim " << dim;
    }
  }
}

// ---- MoE routing (identical selections) and experts
TEST_F(CudaOps, RoutingEveryScoringFunction) {
  ModelConfig c = testing::tiny_config();
  for (int64_t E : {8, 256}) {
    c.n_routed_experts = E;
    c.n_activated_experts = 6;
    const int64_t n = 37, k = 6, vocab = 50;
    const auto logits = random_values(size_t(n * E), rng, 2.0f), bias = random_values(size_t(E), rng, 0.1f);
    std::vector<int32_t> ids(static_cast<size_t>(n)), table(static_cast<size_t>(vocab * k));
    for (auto& i : ids) i = int32_t(rng() % vocab);
    for (auto& e : table) e = int32_t(rng() % E);
    for (ScoringFunc f : {ScoringFunc::sqrtsoftplus, ScoringFunc::sigmoid, ScoringFunc::softmax})
      for (int mode = 0; mode < 3; ++mode) {  // plain, with bias, hash table
        c.scoring = f;
        auto op = [&](Backend& b) {
          const Tensor bt = b.upload(bias, {E}), tt = b.upload_i32(table, {vocab, k});
          const Routing r = b.route(b.upload(logits, {n, E}), mode == 1 ? &bt : nullptr, mode == 2 ? &tt : nullptr,
                                    b.upload_i32(ids, {n}), c);
          return std::pair{b.download(r.weights), b.download_i32(r.experts)};
        };
        const auto want = op(*be->cpu), got = op(*be->gpu);
        EXPECT_EQ(got.second, want.second) << "experts E=" << E << " scoring " << int(f) << " mode " << mode;
        EXPECT_LT(relative_difference(got.first, want.first), 1e-5) << "weights E=" << E << " mode " << mode;
      }
  }
}

TEST_F(CudaOps, RoutedExpertsEveryFormat) {
  for (auto quant : {testing::TinyQuant::bf16, testing::TinyQuant::fp8_mxfp4, testing::TinyQuant::nvfp4}) {
    const fs::path dir = fs::temp_directory_path() / ("tetra_cuda_experts_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    testing::TinyCheckpointOptions o;
    o.quant = quant;
    testing::write_tiny_checkpoint(dir.string(), o);
    const ModelConfig c = load_model_config(dir.string());
    const TensorStore store(dir.string());
    const ModelWeights weights(c, store);
    const std::string f = "layers.1.ffn.experts.";
    for (int64_t n : {1, 4, 19}) {
      const int64_t k = c.n_activated_experts;
      const auto x = random_values(size_t(n * c.dim), rng), rw = random_values(size_t(n * k), rng);
      std::vector<int32_t> sel(static_cast<size_t>(n * k));
      for (int64_t t = 0; t < n; ++t)  // distinct experts per token
        for (int64_t j = 0; j < k; ++j) sel[size_t(t * k + j)] = int32_t((t + j) % c.n_routed_experts);
      auto op = [&](Backend& b) {
        std::vector<Tensor> w1, w2, w3;
        for (int64_t e = 0; e < c.n_routed_experts; ++e) {
          w1.push_back(b.load_linear(weights.linear(f + std::to_string(e) + ".w1")));
          w2.push_back(b.load_linear(weights.linear(f + std::to_string(e) + ".w2")));
          w3.push_back(b.load_linear(weights.linear(f + std::to_string(e) + ".w3")));
        }
        const Routing r{b.upload(rw, {n, k}), b.upload_i32(sel, {n, k})};
        return b.download(b.experts(b.upload(x, {n, c.dim}), r, w1, w2, w3, 2.0));
      };
      const auto want = op(*be->cpu);
      EXPECT_LT(relative_difference(op(*be->gpu), want), kBf16Tolerance) << "experts n=" << n << " quant " << int(quant);
      EXPECT_LT(relative_difference(op(*be->gpu_f32), want), 1e-5) << "experts n=" << n << " (f32)";
    }
    fs::remove_all(dir);
  }
}

// ---- compressor: ragged chunks through the state, with and without overlap
TEST_F(CudaOps, CompressorAcrossRaggedChunks) {
  for (auto [ratio, overlap] : std::vector<std::pair<int64_t, bool>>{{4, true}, {4, false}, {8, false}, {3, true}}) {
    const int64_t width = overlap ? 2 * 24 : 24;
    const auto ape = random_values(size_t(ratio * width), rng);
    CompressorState cs_cpu, cs_gpu;
    int64_t position = 0;
    for (int64_t n : {1, 3, 9, 1, 1, 2, 13, 4}) {
      const auto kv = random_values(size_t(n * width), rng), gate = random_values(size_t(n * width), rng);
      auto op = [&](Backend& b, CompressorState& s) {
        return b.download(b.compress(s, b.upload(kv, {n, width}), b.upload(gate, {n, width}), b.upload(ape, {ratio, width}),
                                     position, ratio, overlap));
      };
      const auto want = op(*be->cpu, cs_cpu), got = op(*be->gpu, cs_gpu);
      ASSERT_EQ(got.size(), want.size()) << "ratio " << ratio << " at " << position;
      EXPECT_LT(relative_difference(got, want), kF32Tolerance) << "ratio " << ratio << " overlap " << overlap << " at " << position;
      EXPECT_EQ(cs_gpu.windows, cs_cpu.windows);
      position += n;
    }
    EXPECT_EQ(be->gpu->download(cs_gpu.pending_kv), be->cpu->download(cs_cpu.pending_kv));
    if (overlap) {
      EXPECT_EQ(be->gpu->download(cs_gpu.previous_gate), be->cpu->download(cs_cpu.previous_gate));
    }
  }
}

// ---- attention with sinks over ragged index lists
TEST_F(CudaOps, SparseAttention) {
  for (auto [n, heads, d, K, R] : std::vector<std::array<int64_t, 5>>{{1, 1, 64, 1, 3}, {5, 4, 64, 13, 40}, {3, 2, 512, 200, 300}}) {
    const auto q = random_values(size_t(n * heads * d), rng, 0.3f), kv = random_values(size_t(R * d), rng);
    const auto sinks = random_values(size_t(heads), rng);
    std::vector<int32_t> idx(static_cast<size_t>(n * K));
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < K; ++j) idx[size_t(r * K + j)] = (j + r) % 4 == 3 ? -1 : int32_t(rng() % R);
    auto op = [&](Backend& b) {
      return b.download(b.attention(b.upload(q, {n, heads * d}), b.upload(kv, {R, d}), b.upload_i32(idx, {n, K}),
                                    b.upload(sinks, {heads}), 1.0 / std::sqrt(double(d))));
    };
    EXPECT_LT(relative_difference(op(*be->gpu), op(*be->cpu)), kF32Tolerance) << "n " << n << " K " << K;
  }
}

// ---- indexer: identical top-k when scores have no ties, fewer visible keys than k
TEST_F(CudaOps, IndexerTopK) {
  const int64_t heads = 4, d = 32, keys_total = 70;
  const std::vector<int32_t> begin{0, 0, 10, 40, 40}, visible{0, 2, 30, 30, 7}, available{0, 5, 30, 30, 30};
  const int64_t n = int64_t(begin.size());
  auto q = random_values(size_t(n * heads * d), rng), w = random_values(size_t(n * heads), rng);
  auto keys = random_values(size_t(keys_total * d), rng);
  // No ties: every key leans along u and head 0 of every query is u, so head 0's ReLU never
  // clips and (with positive head weights) the scores differ. Random signs elsewhere would
  // zero whole rows of ReLUs, and the reference orders equal scores arbitrarily.
  for (int64_t c = 0; c < keys_total; ++c)
    for (int64_t i = 0; i < d; ++i) keys[size_t(c * d + i)] += 6.0f / std::sqrt(float(d));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < d; ++i) q[size_t(r * heads * d + i)] = 1.0f / std::sqrt(float(d));
  for (float& x : w) x = std::fabs(x) + 0.1f;
  for (int64_t k : {1, 3, 16, 40}) {
    auto op = [&](Backend& b) {
      return b.download_i32(b.indexer_topk(b.upload(q, {n, heads * d}), b.upload(w, {n, heads}), b.upload(keys, {keys_total, d}),
                                           b.upload_i32(begin, {n}), b.upload_i32(visible, {n}), b.upload_i32(available, {n}),
                                           heads, k, 0.125));
    };
    EXPECT_EQ(op(*be->gpu), op(*be->cpu)) << "k " << k;
  }
}

// ---- caches: the encoders bit for bit (wide magnitudes, zeros, tiny values), the decoders exactly
TEST_F(CudaOps, CacheCodecsBitIdentical) {
  for (int64_t d : {64, 128, 512}) {
    const int64_t n = 9, rope = d == 512 ? 64 : 16;
    std::vector<float> x = random_values(size_t(n * d), rng);
    for (int64_t i = 0; i < n * d; ++i) x[size_t(i)] *= std::ldexp(1.0f, int(i % 41) - 20);  // 2^-20 .. 2^20
    std::fill(x.begin(), x.begin() + d, 0.0f);                    // an all-zero row
    for (int64_t i = d; i < 2 * d; ++i) x[size_t(i)] = 1e-30f * float(i - d);  // below the scale floors
    x[size_t(2 * d)] = 448.0f * 3;  // saturating code paths
    for (KvCacheDtype t : {KvCacheDtype::bf16, KvCacheDtype::fp8}) {
      auto enc = [&](Backend& b) {
        const Tensor e = b.encode_kv(b.upload(x, {n, d}), t, rope);
        return std::pair{e, b.download(b.decode_kv(e, t, d, rope))};
      };
      const auto [ec, dc] = enc(*be->cpu);
      const auto [eg, dg] = enc(*be->gpu);
      ASSERT_EQ(ec.shape(), eg.shape());
      const std::vector<uint8_t> gpu_bytes = device_bytes(eg);
      EXPECT_EQ(std::memcmp(gpu_bytes.data(), ec.data<uint8_t>(), gpu_bytes.size()), 0) << "kv encode d=" << d << " type " << int(t);
      EXPECT_EQ(dg, dc) << "kv decode d=" << d;
    }
    for (IndexerCacheDtype t : {IndexerCacheDtype::bf16, IndexerCacheDtype::fp4}) {
      if (d == 512 && t == IndexerCacheDtype::fp4) continue;  // indexer heads are at most 128 wide
      const Tensor ec = be->cpu->encode_indexer(be->cpu->upload(x, {n, d}), t);
      const Tensor eg = be->gpu->encode_indexer(be->gpu->upload(x, {n, d}), t);
      ASSERT_EQ(ec.shape(), eg.shape());
      const std::vector<uint8_t> gpu_bytes = device_bytes(eg);
      EXPECT_EQ(std::memcmp(gpu_bytes.data(), ec.data<uint8_t>(), gpu_bytes.size()), 0) << "indexer encode d=" << d;
      EXPECT_EQ(be->gpu->download(be->gpu->decode_indexer(eg, t, d)), be->cpu->download(be->cpu->decode_indexer(ec, t, d)));
      auto query = [&](Backend& b) { return b.download(b.indexer_query(b.upload(x, {n, d}), t, d)); };
      EXPECT_EQ(query(*be->gpu), query(*be->cpu)) << "indexer query d=" << d;
    }
  }
}

// ---- memory ops
TEST_F(CudaOps, SliceAndConcatRows) {
  const auto a = random_values(60, rng), c = random_values(24, rng);
  auto op = [&](Backend& b) {
    const Tensor ta = b.upload(a, {10, 6}), tc = b.upload(c, {4, 6});
    const Tensor s = b.slice_rows(ta, 3, 5);
    return b.download(b.concat_rows({tc, Tensor(), s, b.slice_rows(ta, 9, 0)}, {6}, ElemType::f32));
  };
  EXPECT_EQ(op(*be->gpu), op(*be->cpu));
}

}  // namespace
}  // namespace tetra
