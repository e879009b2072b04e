// Every CUDA backend op against the CPU reference op on identical inputs: bf16-input linear
// layers within 1e-2 (relative), f32 ops within 1e-4, selections (routing, indexer top-k)
// identical when the scores have no near-ties.
#include <cuda_runtime.h>

#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/linear.h"
#include "backend/cuda/paged.h"
#include "bench/geometry.h"
#include "io/safetensors.h"
#include "runtime/paged_cache.h"
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
  // the mma.sync attention every GPU runs (on a Hopper, gpu's runs on warpgroup MMA)
  std::unique_ptr<Backend> gpu_mma = make_cuda_backend({.warpgroup_mma_attention = false});
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

// A weight format with the dtypes of its codes and scales.
struct WeightLayout {
  WeightFormat format;
  DType weight_dtype, scale_dtype;
};

// A tiny checkpoint of one quantization in a temporary folder (removed at the end), loaded.
struct TinyModel {
  explicit TinyModel(const testing::TinyCheckpointOptions& o) : dir(make_dir()) {
    testing::write_tiny_checkpoint(dir.string(), o);
    config = load_model_config(dir.string());
    store = std::make_unique<TensorStore>(dir.string());
    weights = std::make_unique<ModelWeights>(config, *store);
  }
  ~TinyModel() { fs::remove_all(dir); }
  TinyModel(const TinyModel&) = delete;
  TinyModel& operator=(const TinyModel&) = delete;

  static fs::path make_dir() {
    const fs::path d = fs::temp_directory_path() / ("tetra_cuda_ops_" + std::to_string(::getpid()));
    fs::remove_all(d);
    return d;
  }
  fs::path dir;
  ModelConfig config;
  std::unique_ptr<TensorStore> store;
  std::unique_ptr<ModelWeights> weights;
};

// ---- linear layers: every tensor of tiny checkpoints in every format, several batch sizes
TEST_F(CudaOps, LinearEveryFormatAndBatchSize) {
  for (auto quant : {testing::TinyQuant::bf16, testing::TinyQuant::fp8_mxfp4, testing::TinyQuant::nvfp4}) {
    const TinyModel tiny({.quant = quant, .fp4_storage = DType::u8});
    const ModelConfig& config = tiny.config;
    const ModelWeights& weights = *tiny.weights;
    for (const LinearWeight* w : weights.linears()) {
      const Tensor wc = be->cpu->load_linear(*w), wg = be->gpu->load_linear(*w), wf = be->gpu_f32->load_linear(*w);
      const bool grouped = w->role.ends_with("wo_a");
      const int64_t groups = grouped ? config.o_groups : 1;
      for (int64_t n : {1, 3, 8, 9, 64, 65, 70, 300}) {  // both sides of the tensor-core path's 65 rows
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
  }
}

// The decode kernels size their grids to ~2048 warps: one wave on the H200 only while a
// multiprocessor holds 16 of their warps (at most 128 registers a thread). A change that costs
// registers fails here rather than only in a benchmark: four chunks in flight per warp took
// 150-178 registers, and fp8 wq_b went from 14.7 to 21.8 µs. Every V4-Flash shape and format at
// one token tile (1 and 8 rows; the router and the head, with f32 inputs in three bf16 parts
// each, 1 and 2). Wider tiles hold more accumulators and are not bound to 128 registers.
TEST_F(CudaOps, DecodeLinearsHoldSixteenWarpsPerMultiprocessor) {
  const ModelConfig c = bench::synthetic_geometry("v4-flash", 1);
  const int64_t q = c.n_heads * c.head_dim;
  struct Shape {
    const char* name;
    int64_t out, in, groups;
    bool f32_input;
  };
  const std::vector<Shape> shapes{
      {"attn.wq_a", c.q_lora_rank, c.dim, 1, false},
      {"attn.wq_b", q, c.q_lora_rank, 1, false},
      {"attn.wkv", c.head_dim, c.dim, 1, false},
      {"attn.wo_a", c.o_groups * c.o_lora_rank, q / c.o_groups, c.o_groups, false},
      {"attn.wo_b", c.dim, c.o_groups * c.o_lora_rank, 1, false},
      {"indexer.wq_b", c.index_n_heads * c.index_head_dim, c.q_lora_rank, 1, false},
      {"expert w1", c.moe_inter_dim, c.dim, 1, false},
      {"expert w2", c.dim, c.moe_inter_dim, 1, false},
      {"router", c.n_routed_experts, c.dim, 1, true},
      {"head", c.vocab_size, c.dim, 1, true},
  };
  const std::vector<WeightLayout> formats{{WeightFormat::dense, DType::bf16, DType::f32},
                                          {WeightFormat::fp8_block, DType::f8_e4m3, DType::f8_e8m0},
                                          {WeightFormat::mxfp4, DType::u8, DType::f8_e8m0},
                                          {WeightFormat::nvfp4, DType::u8, DType::f8_e4m3}};
  for (const Shape& shape : shapes)
    for (const WeightLayout& f : formats)
      for (int64_t n : {int64_t(1), shape.f32_input ? int64_t(2) : int64_t(8)}) {
        const cuda::WeightRef w{.format = f.format,
                                .weight_dtype = f.weight_dtype,
                                .scale_dtype = f.scale_dtype,
                                .out = shape.out,
                                .in = shape.in};
        const cuda::LinearGrid grid = cuda::linear_grid(w, n, shape.groups, !shape.f32_input);
        const std::string what = std::string(shape.name) + " format " + std::to_string(int(f.format)) + " n=" +
                                 std::to_string(n);
        ASSERT_GT(grid.blocks, 0) << what << ": not on the tensor cores";
        EXPECT_GE(int64_t(grid.blocks_per_sm) * grid.warps, 16)
            << what << ": " << grid.blocks_per_sm << " blocks of " << grid.warps << " warps a multiprocessor";
      }
}

// The shared expert's gate and up in one op: bit for bit the GPU's two linears and swiglu (the
// one-launch kernel up to 64 rows, the three ops beyond), near the CPU's.
TEST_F(CudaOps, GatedLinearEqualsThreeOps) {
  for (auto quant : {testing::TinyQuant::bf16, testing::TinyQuant::fp8_mxfp4, testing::TinyQuant::nvfp4}) {
    const TinyModel tiny({.quant = quant, .fp4_storage = DType::u8});
    const LinearWeight *w1 = nullptr, *w3 = nullptr;
    for (const LinearWeight* w : tiny.weights->linears()) {
      if (w->role == "layers.1.ffn.shared_experts.w1") w1 = w;
      if (w->role == "layers.1.ffn.shared_experts.w3") w3 = w;
    }
    ASSERT_TRUE(w1 && w3);
    for (double limit : {0.0, 0.5})
      for (int64_t n : {1, 3, 8, 9, 30, 64, 65, 100}) {
        const std::vector<float> x = random_values(size_t(n * w1->in), rng);
        auto gated = [&](Backend& b) {
          return b.download(b.gated_linear(b.upload(x, {n, w1->in}), b.load_linear(*w1), b.load_linear(*w3), limit));
        };
        auto three_ops = [&](Backend& b) {
          const Tensor xt = b.upload(x, {n, w1->in});
          return b.download(b.swiglu(b.linear(xt, b.load_linear(*w1)), b.linear(xt, b.load_linear(*w3)), limit));
        };
        const std::vector<float> want = three_ops(*be->cpu), got = gated(*be->gpu);
        EXPECT_EQ(got, three_ops(*be->gpu)) << "n=" << n << " limit " << limit << ": one launch and three ops differ";
        // With the clamp on, values near its edges take the other branch under bf16 rounding: the
        // bf16 result is compared with the CPU's without it (the swiglu op test covers the clamp).
        if (limit == 0.0) {
          EXPECT_LT(relative_difference(got, want), kBf16Tolerance) << "n=" << n;
        }
        EXPECT_EQ(gated(*be->gpu_f32), three_ops(*be->gpu_f32)) << "n=" << n << " limit " << limit << " (f32)";
        EXPECT_LT(relative_difference(gated(*be->gpu_f32), want), 1e-5) << "n=" << n << " limit " << limit << " (f32)";
      }
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
      for (int64_t n : {1, 2, 17, 100}) {
        const std::vector<float> x = random_values(size_t(n * in), rng);
        auto run = [&](Backend& b) { return b.download(b.linear(b.upload(x, {n, in}), b.load_linear(w))); };
        const std::vector<float> want = run(*be->cpu);
        EXPECT_LT(relative_difference(run(*be->gpu), want), kBf16Tolerance) << out << "x" << in << " n=" << n;
        EXPECT_LT(relative_difference(run(*be->gpu_f32), want), 1e-5) << out << "x" << in << " n=" << n;
      }
    }
}

// The tensor-core path (65+ rows) on formats the tiny checkpoints lack (f16, FP8 blocks with
// f32 scales that are no powers of two) and wider rows, ragged FP8 blocks, o_groups: bf16
// within 1e-2, the exact mode within 1e-5.
struct SyntheticLinear {
  std::vector<std::byte> weight, scale;
  LinearWeight w;
};

SyntheticLinear synthetic_linear(WeightFormat format, DType dtype, DType scale_dtype, int64_t out, int64_t in,
                                 std::mt19937& rng) {
  SyntheticLinear s;
  auto bytes = [&](int64_t n, int lo, int hi) {
    std::uniform_int_distribution<int> d(lo, hi);
    std::vector<std::byte> v(static_cast<size_t>(n));
    for (auto& b : v) b = std::byte(d(rng));
    return v;
  };
  auto floats = [&](int64_t n, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<std::byte> v(static_cast<size_t>(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
      const float f = d(rng);
      std::memcpy(v.data() + i * 4, &f, 4);
    }
    return v;
  };
  Shape wshape{out, in}, sshape;
  switch (format) {
    case WeightFormat::dense: {
      const auto values = random_values(size_t(out * in), rng);
      s.weight.resize(values.size() * 2);
      for (size_t i = 0; i < values.size(); ++i) {
        const uint16_t h = f32_to_f16(values[i]);
        std::memcpy(s.weight.data() + 2 * i, &h, 2);
      }
      break;
    }
    case WeightFormat::fp8_block:
    case WeightFormat::fp8_tensor:
      s.weight = bytes(out * in, 0, 255);
      for (auto& b : s.weight)
        if ((uint8_t(b) & 0x7F) == 0x7F) b = std::byte(0x3C);  // no NaN codes
      sshape = format == WeightFormat::fp8_tensor ? Shape{} : Shape{(out + 127) / 128, (in + 127) / 128};
      s.scale = scale_dtype == DType::f32 ? floats(shape_numel(sshape), 0.003f, 0.03f) : bytes(shape_numel(sshape), 118, 124);
      break;
    case WeightFormat::mxfp4:
      s.weight = bytes(out * in / 2, 0, 255);
      sshape = {out, in / 32};
      s.scale = bytes(out * in / 32, 118, 126);
      break;
    case WeightFormat::nvfp4:
      s.weight = bytes(out * in / 2, 0, 255);
      sshape = {out, in / 16};
      s.scale = bytes(out * in / 16, 0x20, 0x50);
      s.w.global_scale = 0.0371f;
      break;
  }
  s.w.role = "synthetic";
  s.w.format = format;
  s.w.out = out;
  s.w.in = in;
  s.w.weight = TensorView{dtype, wshape, s.weight.data(), s.weight.size()};
  if (!s.scale.empty()) s.w.scale = TensorView{scale_dtype, sshape, s.scale.data(), s.scale.size()};
  return s;
}

TEST_F(CudaOps, TensorCoreLinearSyntheticFormats) {
  const std::vector<WeightLayout> cases{{WeightFormat::dense, DType::f16, DType::f32},
                                        {WeightFormat::fp8_block, DType::f8_e4m3, DType::f32},
                                        {WeightFormat::fp8_block, DType::f8_e4m3, DType::f8_e8m0},
                                        {WeightFormat::fp8_tensor, DType::f8_e4m3, DType::f32},
                                        {WeightFormat::mxfp4, DType::u8, DType::f8_e8m0},
                                        {WeightFormat::nvfp4, DType::u8, DType::f8_e4m3}};
  for (const WeightLayout& c : cases)
    for (auto [out, in, groups] : std::vector<std::array<int64_t, 3>>{{300, 1024, 1}, {32, 160, 1}, {256, 512, 4}}) {
      const SyntheticLinear s = synthetic_linear(c.format, c.weight_dtype, c.scale_dtype, out, in, rng);
      for (int64_t n : {65, 257}) {
        const std::vector<float> x = random_values(size_t(n * groups * in), rng);
        auto run = [&](Backend& b) {
          const Tensor xt = b.upload(x, {n, groups * in}), wt = b.load_linear(s.w);
          return b.download(groups > 1 ? b.grouped_linear(xt, wt, groups) : b.linear(xt, wt));
        };
        const std::vector<float> want = run(*be->cpu);
        const std::string what = std::string(weight_format_name(c.format)) + " " + std::to_string(out) + "x" +
                                 std::to_string(in) + " groups " + std::to_string(groups) + " n=" + std::to_string(n);
        EXPECT_LT(relative_difference(run(*be->gpu), want), kBf16Tolerance) << what;
        EXPECT_LT(relative_difference(run(*be->gpu_f32), want), 1e-5) << what << " (f32)";
      }
    }
}

// A linear layer of one checkpoint format with random codes (every fp4 code, every finite e4m3
// code) and scales: MXFP4 scales up to 2^8 (bytes above 128 take the two-factor path), FP8
// blocks with f32 or ue8m0 scales, per-tensor FP8, NVFP4 with a global scale. It owns the bytes
// its LinearWeight views.
struct RandomLinear {
  std::vector<uint8_t> codes, scales_u8;
  std::vector<float> scales_f32;
  LinearWeight w;

  RandomLinear(WeightFormat format, DType weight_dtype, DType scale_dtype, int64_t out, int64_t in, std::mt19937& rng) {
    const bool fp4 = format == WeightFormat::mxfp4 || format == WeightFormat::nvfp4;
    codes.resize(size_t(out * in * (format == WeightFormat::dense ? 2 : 1) / (fp4 ? 2 : 1)));
    if (format == WeightFormat::dense) {
      const std::vector<float> v = random_values(size_t(out * in), rng);
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
    switch (format) {
      case WeightFormat::fp8_block: {
        const size_t n = size_t((out + 127) / 128 * ((in + 127) / 128));
        if (scale_dtype == DType::f32) scales_f32 = random_values(n, rng, 0.01f);
        else for (size_t i = 0; i < n; ++i) scales_u8.push_back(uint8_t(118 + rng() % 16));
        break;
      }
      case WeightFormat::fp8_tensor: scales_f32 = {0.0123f}; break;
      case WeightFormat::mxfp4:  // 120..135: includes the scales above 2 (bytes above 128)
        for (int64_t i = 0; i < out * in / 32; ++i) scales_u8.push_back(uint8_t(120 + rng() % 16));
        break;
      case WeightFormat::nvfp4:
        for (int64_t i = 0; i < out * in / 16; ++i) scales_u8.push_back(uint8_t(rng() % 0x7F));  // finite e4m3
        break;
      case WeightFormat::dense: break;
    }
    w.role = "large";
    w.format = format;
    w.out = out;
    w.in = in;
    w.global_scale = format == WeightFormat::nvfp4 ? 0.37f : 1.0f;
    const Shape code_shape = fp4 ? Shape{out, in / 2} : Shape{out, in};
    w.weight = TensorView{weight_dtype, code_shape, reinterpret_cast<const std::byte*>(codes.data()), codes.size()};
    const int64_t scale_rows = format == WeightFormat::fp8_block ? (out + 127) / 128 : out;
    const int64_t scale_cols = format == WeightFormat::fp8_block ? (in + 127) / 128
                               : format == WeightFormat::mxfp4   ? in / 32
                                                                 : in / 16;
    if (!scales_f32.empty())
      w.scale = TensorView{DType::f32, format == WeightFormat::fp8_tensor ? Shape{1} : Shape{scale_rows, scale_cols},
                           reinterpret_cast<const std::byte*>(scales_f32.data()), scales_f32.size() * 4};
    else if (!scales_u8.empty())
      w.scale = TensorView{scale_dtype, {scale_rows, scale_cols}, reinterpret_cast<const std::byte*>(scales_u8.data()),
                           scales_u8.size()};
  }
  RandomLinear(const RandomLinear&) = delete;
  RandomLinear& operator=(const RandomLinear&) = delete;
};

// Every tensor-core path at sizes past the tiny checkpoints': 1..70 tokens (each token-tile
// width and a second pass), split-K over many chunks, rows not a multiple of the 32-row tile,
// inputs ending in a partial chunk, grouped rows, and the scale cases of RandomLinear.
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
    const RandomLinear r(c.format, c.weight_dtype, c.scale_dtype, c.out, c.in, rng);
    const LinearWeight& w = r.w;
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

// The tensor-core kernels decode NVFP4 scales without a NaN case, so a NaN scale byte (0x7F or
// 0xFF) fails at load, naming the tensor and the block; the same weight without it loads.
TEST_F(CudaOps, NanNvfp4ScaleFailsAtLoad) {
  struct Case {
    uint8_t nan;
    int64_t row, block;
    const char* where;
  };
  // a block inside the scales, and the very last one (in the scan's last eight-byte word)
  for (const Case& c : {Case{0x7F, 5, 2, "row 5, inputs 32..47"}, Case{0xFF, 63, 15, "row 63, inputs 240..255"}}) {
    RandomLinear r(WeightFormat::nvfp4, DType::u8, DType::f8_e4m3, 64, 256, rng);
    r.w.role = "layers.0.ffn.experts.3.w1";
    r.w.sources = {"layers.0.ffn.experts.3.w1.weight", "layers.0.ffn.experts.3.w1.weight_scale"};
    EXPECT_NO_THROW(be->gpu->load_linear(r.w));
    r.scales_u8[size_t(c.row * 16 + c.block)] = c.nan;
    try {
      be->gpu->load_linear(r.w);
      ADD_FAILURE() << "a NaN scale loaded";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(e.code(), ExitCode::model);
      EXPECT_NE(what.find("layers.0.ffn.experts.3.w1.weight_scale"), std::string::npos) << what;
      EXPECT_NE(what.find(c.where), std::string::npos) << what;
    }
  }
}

// linears(): the weights of one layout reading one input share a launch at decode sizes (two
// layouts interleaved here, rows not a multiple of the 32-row tile, 1..64 tokens), and a prefill
// run takes the linears one by one; every product as the CPU's linear gives it.
TEST_F(CudaOps, LinearsSharingAnInput) {
  const int64_t in = 1024;
  const std::vector<WeightLayout> layouts{{WeightFormat::fp8_block, DType::f8_e4m3, DType::f8_e8m0},
                                          {WeightFormat::nvfp4, DType::u8, DType::f8_e4m3}};
  std::vector<std::unique_ptr<RandomLinear>> mats;
  for (int64_t out : {512, 64, 300})
    for (const WeightLayout& l : layouts)
      mats.push_back(std::make_unique<RandomLinear>(l.format, l.weight_dtype, l.scale_dtype, out, in, rng));
  // 65 rows: the tensor cores, x rounded once for all six; 75 as runs of 5 and 70: both paths
  for (int64_t n : {1, 5, 8, 9, 40, 64, 65, 75}) {
    const std::vector<float> x = random_values(size_t(n * in), rng);
    const std::vector<int64_t> runs = n == 75 ? std::vector<int64_t>{5, 70} : std::vector<int64_t>{};
    auto run = [&](Backend& b, bool one_call) {
      std::vector<Tensor> weights;
      std::vector<const Tensor*> ws;
      for (const auto& m : mats) weights.push_back(b.load_linear(m->w));
      for (const Tensor& w : weights) ws.push_back(&w);
      const Tensor xt = b.upload(x, {n, in});
      std::vector<std::vector<float>> out;
      if (one_call)
        for (const Tensor& y : b.linears(xt, ws, runs)) out.push_back(b.download(y));
      else
        for (const Tensor* w : ws) out.push_back(b.download(b.linear(xt, *w, runs)));
      return out;
    };
    const auto want = run(*be->cpu, true), got = run(*be->gpu, true), got_f32 = run(*be->gpu_f32, true);
    ASSERT_EQ(got.size(), mats.size());
    const auto each = n >= 65 ? run(*be->gpu, false) : got;
    for (size_t i = 0; i < mats.size(); ++i) {
      const std::string what = std::string(weight_format_name(mats[i]->w.format)) + " " +
                               std::to_string(mats[i]->w.out) + " rows, n=" + std::to_string(n);
      EXPECT_LT(relative_difference(got[i], want[i]), kBf16Tolerance) << what;
      EXPECT_LT(relative_difference(got_f32[i], want[i]), 1e-5) << what << " (f32)";
      EXPECT_EQ(got[i], each[i]) << what << ": linears() and linear() differ";
    }
  }
}

// cuda::linears itself: one launch for bf16 matrices of one input width, each product within
// f32 rounding of linear()'s (the set splits its sums as one matrix of all the rows); mixed input
// widths and more than kMaxLinearsPerLaunch matrices are refused, launching nothing.
TEST_F(CudaOps, LinearsInOneLaunch) {
  const int64_t in = 2048, n = 3;
  const std::vector<int64_t> outs{1024, 512, 96, 1024, 40};
  std::vector<cuda::DeviceBuffer> weights, outputs;
  std::vector<cuda::WeightRef> refs;
  std::vector<float*> ys;
  for (int64_t out : outs) {
    std::vector<uint16_t> codes(size_t(out * in));
    const std::vector<float> values = random_values(codes.size(), rng);
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = f32_to_bf16(values[i]);
    weights.emplace_back(codes.size() * 2);
    ASSERT_EQ(cudaMemcpy(weights.back().get(), codes.data(), codes.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    refs.push_back({.format = WeightFormat::dense, .weight_dtype = DType::bf16, .scale_dtype = DType::f32,
                    .weight = weights.back().get(), .out = out, .in = in});
    outputs.emplace_back(size_t(n * out) * sizeof(float));
    ys.push_back(outputs.back().get<float>());
  }
  const std::vector<float> x = random_values(size_t(n * in), rng);
  cuda::DeviceBuffer xd(x.size() * sizeof(float)), single(size_t(n * 1024) * sizeof(float));
  ASSERT_EQ(cudaMemcpy(xd.get(), x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_TRUE(cuda::linears(refs.data(), ys.data(), int(refs.size()), xd.get<float>(), n, true, nullptr));
  for (size_t i = 0; i < refs.size(); ++i) {
    cuda::linear(refs[i], xd.get<float>(), n, 1, true, single.get<float>(), nullptr);
    std::vector<float> want(size_t(n * outs[i])), got(want.size());
    ASSERT_EQ(cudaMemcpy(want.data(), single.get(), want.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), ys[i], got.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_LT(relative_difference(got, want), 1e-6) << outs[i] << " rows";
  }
  cuda::WeightRef other_width = refs[1];
  other_width.in = in / 2;
  const std::vector<cuda::WeightRef> mixed{refs[0], other_width};
  EXPECT_FALSE(cuda::linears(mixed.data(), ys.data(), 2, xd.get<float>(), n, true, nullptr));
  const std::vector<cuda::WeightRef> nine(9, refs[2]);
  const std::vector<float*> nine_ys(9, ys[2]);
  EXPECT_FALSE(cuda::linears(nine.data(), nine_ys.data(), 9, xd.get<float>(), n, true, nullptr));
}

// f32 inputs to bf16 rows (the head, the router) as three bf16 parts: every token count gives
// each row the bits it has alone (from 9 tokens on the activations' parts are staged in shared
// memory, staged_columns.cuh; up to 8 each lane splits its own), within f32 rounding of the exact
// sums. Rows that end in a partial chunk and a partial row tile; 1000 rows split each row tile
// over a cluster of blocks, 4200 take two row tiles a warp.
TEST_F(CudaOps, F32InputRowsDoNotDependOnTheTokenCount) {
  const int64_t in = 4104, most = 45;
  const std::vector<float> x = random_values(size_t(most * in), rng);
  cuda::DeviceBuffer xd(x.size() * sizeof(float));
  ASSERT_EQ(cudaMemcpy(xd.get(), x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  for (const int64_t out : {1000, 4200}) {
    std::vector<uint16_t> codes(size_t(out * in));
    const std::vector<float> values = random_values(codes.size(), rng);
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = f32_to_bf16(values[i]);
    cuda::DeviceBuffer weight(codes.size() * 2), yd(size_t(most * out) * sizeof(float));
    ASSERT_EQ(cudaMemcpy(weight.get(), codes.data(), codes.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    const cuda::WeightRef w{.format = WeightFormat::dense, .weight_dtype = DType::bf16, .scale_dtype = DType::f32,
                            .weight = weight.get(), .out = out, .in = in};
    auto run = [&](int64_t first, int64_t n) {
      cuda::linear(w, xd.get<float>() + first * in, n, 1, false, yd.get<float>(), nullptr);
      std::vector<float> y(size_t(n * out));
      EXPECT_EQ(cudaMemcpy(y.data(), yd.get(), y.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
      return y;
    };
    std::vector<float> alone, exact(size_t(most * out));
    for (int64_t t = 0; t < most; ++t) {
      const std::vector<float> y = run(t, 1);
      alone.insert(alone.end(), y.begin(), y.end());
      for (int64_t o = 0; o < out; ++o) {
        double s = 0;
        for (int64_t k = 0; k < in; ++k) s += double(bf16_to_f32(codes[size_t(o * in + k)])) * x[size_t(t * in + k)];
        exact[size_t(t * out + o)] = float(s);
      }
    }
    EXPECT_LT(relative_difference(alone, exact), 1e-5) << out << " rows";
    for (const int64_t n : std::vector<int64_t>{2, 8, 9, 21, 22, 32, most}) {
      const std::vector<float> y = run(0, n);
      EXPECT_EQ(y, std::vector<float>(alone.begin(), alone.begin() + n * out)) << out << " rows, " << n << " tokens";
    }
  }
}

// ---- norms, rope, element-wise
TEST_F(CudaOps, NormRopeAndElementwise) {
  for (int64_t group : {1, 7, 64, 1000, 6000})  // up to 1024: a warp per run; beyond: a block
    for (int64_t runs : {5, 20}) {
      const auto x = random_values(size_t(runs * group), rng, 3.0f);
      const auto wt = random_values(size_t(group), rng);
      for (bool with_weight : {false, true}) {
        auto op = [&](Backend& b) {
          const Tensor w = b.upload(wt, {group});
          return b.download(b.rms_norm(b.upload(x, {runs, group}), with_weight ? &w : nullptr, group, 1e-6));
        };
        EXPECT_LT(relative_difference(op(*be->gpu), op(*be->cpu)), kF32Tolerance) << "rms_norm group " << group;
        // a launch of one run takes the instance that reads the weights before its wait: the
        // first run alone must come out as it does among the others, bit for bit
        const std::vector<float> first(x.begin(), x.begin() + group);
        const Tensor w = be->gpu->upload(wt, {group});
        const auto alone = be->gpu->download(
            be->gpu->rms_norm(be->gpu->upload(first, {1, group}), with_weight ? &w : nullptr, group, 1e-6));
        const auto among = op(*be->gpu);
        EXPECT_EQ(alone, std::vector<float>(among.begin(), among.begin() + group)) << "rms_norm group " << group;
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
  // rms_norm then rope in one op: the fused kernel against the CPU's two ops, and bit for bit
  // against the GPU's two ops; head_dim 6 (not whole float4s) and 20 (rotation from value 14)
  // take the GPU's two-op fallback.
  for (int64_t head_dim : {6, 20, 64, 512})
    for (int64_t heads : {1, 3})
      for (bool with_weight : {false, true}) {
        const int64_t rows = 5, half = head_dim == 6 ? 2 : head_dim == 20 ? 3 : head_dim / 8;
        const auto x = random_values(size_t(rows * heads * head_dim), rng, 3.0f);
        const auto wt = random_values(size_t(head_dim), rng);
        std::vector<float> freq(static_cast<size_t>(half));
        for (int64_t i = 0; i < half; ++i) freq[size_t(i)] = std::pow(10000.0f, -float(i) / float(half));
        std::vector<int32_t> pos(static_cast<size_t>(rows));
        for (auto& p : pos) p = int32_t(rng() % 5000);
        auto fused = [&](Backend& b) {
          const Tensor w = b.upload(wt, {head_dim});
          return b.download(b.rms_norm_rope(b.upload(x, {rows, heads * head_dim}), with_weight ? &w : nullptr, head_dim,
                                            1e-6, b.upload_i32(pos, {rows}), b.upload(freq, {half})));
        };
        auto two_ops = [&](Backend& b) {
          const Tensor w = b.upload(wt, {head_dim});
          Tensor t = b.rms_norm(b.upload(x, {rows, heads * head_dim}), with_weight ? &w : nullptr, head_dim, 1e-6);
          b.rope(t, b.upload_i32(pos, {rows}), b.upload(freq, {half}), head_dim, false);
          return b.download(t);
        };
        const auto got = fused(*be->gpu);
        EXPECT_LT(relative_difference(got, two_ops(*be->cpu)), kF32Tolerance) << "rms_norm_rope head_dim " << head_dim;
        EXPECT_EQ(got, two_ops(*be->gpu)) << "rms_norm_rope head_dim " << head_dim << ": fused and two ops differ";
        // the query's heads (no weight) and a one-head key (weighted) in one op: each as rms_norm_rope
        // gives it, bit for bit (one launch where the fused kernel applies)
        const auto key = random_values(size_t(rows * head_dim), rng, 3.0f);
        auto pair = [&](Backend& b, bool together) {
          const Tensor q = b.upload(x, {rows, heads * head_dim}), k = b.upload(key, {rows, head_dim});
          const Tensor w = b.upload(wt, {head_dim}), p = b.upload_i32(pos, {rows}), f = b.upload(freq, {half});
          const std::vector<Tensor> out =
              together ? b.rms_norm_ropes({{&q, nullptr}, {&k, &w}}, head_dim, 1e-6, p, f)
                       : std::vector<Tensor>{b.rms_norm_rope(q, nullptr, head_dim, 1e-6, p, f),
                                             b.rms_norm_rope(k, &w, head_dim, 1e-6, p, f)};
          return std::vector<std::vector<float>>{b.download(out[0]), b.download(out[1])};
        };
        EXPECT_EQ(pair(*be->gpu, true), pair(*be->gpu, false)) << "rms_norm_ropes head_dim " << head_dim;
        // one row (the decode's launches at batch 1, another kernel instance) as among five rows
        const std::vector<float> row(x.begin(), x.begin() + heads * head_dim), key_row(key.begin(), key.begin() + head_dim);
        const Tensor q = be->gpu->upload(row, {1, heads * head_dim}), k = be->gpu->upload(key_row, {1, head_dim});
        const Tensor w = be->gpu->upload(wt, {head_dim}), p = be->gpu->upload_i32(std::span(pos).first(1), {1}),
                     f = be->gpu->upload(freq, {half});
        const std::vector<Tensor> one = be->gpu->rms_norm_ropes({{&q, nullptr}, {&k, &w}}, head_dim, 1e-6, p, f);
        const auto five = pair(*be->gpu, true);
        EXPECT_EQ(be->gpu->download(one[0]), std::vector<float>(five[0].begin(), five[0].begin() + heads * head_dim))
            << "rms_norm_ropes one row, head_dim " << head_dim;
        EXPECT_EQ(be->gpu->download(one[1]), std::vector<float>(five[1].begin(), five[1].begin() + head_dim))
            << "rms_norm_ropes one row, head_dim " << head_dim;
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
  for (int64_t dim : {64, 300, 2500}) {  // 2500: several ragged column blocks and mix slices
    c.dim = dim;
    const int64_t hc = c.hc_mult, flat = hc * dim, mix = (2 + hc) * hc;
    for (int64_t n : {1, 5, 300}) {  // 300: the finishing kernels' 256-thread blocks
      const auto h = random_values(size_t(n * flat), rng), fn = random_values(size_t(mix * flat), rng, 0.05f);
      const auto base = random_values(size_t(mix), rng), scale = random_values(3, rng);
      const auto y = random_values(size_t(n * dim), rng), norm = random_values(size_t(dim), rng);
      auto pre = [&](Backend& b) {
        const MixWeights m = b.hc_pre(b.upload(h, {n, flat}), b.upload(fn, {mix, flat}), b.upload(base, {mix}),
                                      b.upload(scale, {3}), b.upload(norm, {dim}), c);
        const Tensor out = b.hc_post(b.upload(h, {n, flat}), b.upload(y, {n, dim}), nullptr, m.post, m.comb);
        return std::vector<std::vector<float>>{b.download(m.x), b.download(m.post), b.download(m.comb), b.download(out)};
      };
      const auto want = pre(*be->cpu), got = pre(*be->gpu);
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_LT(relative_difference(got[i], want[i]), kF32Tolerance) << "hc_pre/post output " << i << " dim " << dim;
      // the post update fused with the next pre mix: as the two ops run one after the other,
      // bit for bit on the GPU (the fused mix pass below 64 rows), and near the CPU
      auto post_pre = [&](Backend& b, bool fused) {
        const MixWeights m = b.hc_pre(b.upload(h, {n, flat}), b.upload(fn, {mix, flat}), b.upload(base, {mix}),
                                      b.upload(scale, {3}), b.upload(norm, {dim}), c);
        const Tensor next_fn = b.upload(std::vector<float>(fn.rbegin(), fn.rend()), {mix, flat});
        Streams s;
        if (fused) {
          s = b.hc_post_pre(b.upload(h, {n, flat}), b.upload(y, {n, dim}), nullptr, m.post, m.comb, next_fn,
                            b.upload(base, {mix}), b.upload(scale, {3}), b.upload(norm, {dim}), c);
        } else {
          s.h = b.hc_post(b.upload(h, {n, flat}), b.upload(y, {n, dim}), nullptr, m.post, m.comb);
          s.mix = b.hc_pre(s.h, next_fn, b.upload(base, {mix}), b.upload(scale, {3}), b.upload(norm, {dim}), c);
        }
        return std::vector<std::vector<float>>{b.download(s.h), b.download(s.mix.x), b.download(s.mix.post),
                                               b.download(s.mix.comb)};
      };
      const auto fused = post_pre(*be->gpu, true);
      EXPECT_EQ(fused, post_pre(*be->gpu, false)) << "hc_post_pre against hc_post, hc_pre: " << n << " rows, dim " << dim;
      const auto fused_cpu = post_pre(*be->cpu, true);
      for (size_t i = 0; i < fused.size(); ++i)
        EXPECT_LT(relative_difference(fused[i], fused_cpu[i]), kF32Tolerance) << "hc_post_pre output " << i << " dim " << dim;
      // a second output added on the way (a MoE's routed and shared experts): add() then the op,
      // bit for bit, on both backends (below 64 rows the fused mix pass, from 64 the four-column
      // post kernel)
      const auto y2 = random_values(size_t(n * dim), rng);
      auto with_plus = [&](Backend& b, bool plus) {
        const MixWeights m = b.hc_pre(b.upload(h, {n, flat}), b.upload(fn, {mix, flat}), b.upload(base, {mix}),
                                      b.upload(scale, {3}), b.upload(norm, {dim}), c);
        const Tensor yt = b.upload(y, {n, dim}), y2t = b.upload(y2, {n, dim});
        const Tensor first = plus ? yt : b.add(yt, y2t);
        const Tensor* second = plus ? &y2t : nullptr;
        const Streams s = b.hc_post_pre(b.upload(h, {n, flat}), first, second, m.post, m.comb, b.upload(fn, {mix, flat}),
                                        b.upload(base, {mix}), b.upload(scale, {3}), b.upload(norm, {dim}), c);
        const Tensor last = b.hc_post(b.upload(h, {n, flat}), first, second, m.post, m.comb);
        return std::vector<std::vector<float>>{b.download(s.h), b.download(s.mix.x), b.download(last)};
      };
      EXPECT_EQ(with_plus(*be->gpu, true), with_plus(*be->gpu, false)) << "y_plus against add: " << n << " rows, dim " << dim;
      EXPECT_EQ(with_plus(*be->cpu, true), with_plus(*be->cpu, false)) << "cpu y_plus against add";
      auto head = [&](Backend& b) {
        return b.download(b.hc_head(b.upload(h, {n, flat}), b.upload(std::vector<float>(fn.begin(), fn.begin() + hc * flat), {hc, flat}),
                                    b.upload(std::vector<float>(base.begin(), base.begin() + hc), {hc}),
                                    b.upload(std::vector<float>(scale.begin(), scale.begin() + 1), {1}),
                                    b.upload(norm, {dim}), c));
      };
      EXPECT_LT(relative_difference(head(*be->gpu), head(*be->cpu)), kF32Tolerance) << "hc_head dim " << dim;
      if (n > 1) {  // a row's results do not depend on how many rows share the launch: bit for bit
        Backend& g = *be->gpu;
        auto first_row = [&](int64_t rows) {
          const MixWeights m = g.hc_pre(g.upload(std::vector<float>(h.begin(), h.begin() + rows * flat), {rows, flat}),
                                        g.upload(fn, {mix, flat}), g.upload(base, {mix}), g.upload(scale, {3}),
                                        g.upload(norm, {dim}), c);
          std::vector<float> x = g.download(m.x), comb = g.download(m.comb);
          std::vector<float> post = g.download(
              g.hc_post(g.upload(std::vector<float>(h.begin(), h.begin() + rows * flat), {rows, flat}),
                        g.upload(std::vector<float>(y.begin(), y.begin() + rows * dim), {rows, dim}), nullptr, m.post,
                        m.comb));
          x.resize(size_t(dim));
          comb.resize(size_t(hc * hc));
          post.resize(size_t(flat));
          x.insert(x.end(), comb.begin(), comb.end());
          x.insert(x.end(), post.begin(), post.end());
          return x;
        };
        EXPECT_EQ(first_row(1), first_row(n)) << "hc_pre / hc_post row 0 alone and among " << n << " rows, dim " << dim;
      }
    }
  }
}

// The tiled mix pass (from 64 rows): every row equals its computation alone (the one-row kernels),
// bit for bit, wherever its tile falls and however the kernel maps rows to lanes (HyperConnections
// checks the first row only).
TEST_F(CudaOps, HyperConnectionsRowsOfManyTiles) {
  ModelConfig c = testing::tiny_config();
  c.dim = 2500;  // 40 slices a row
  const int64_t hc = c.hc_mult, flat = hc * c.dim, mix = (2 + hc) * hc, n = 2000;
  const auto h = random_values(size_t(n * flat), rng), fn = random_values(size_t(mix * flat), rng, 0.05f);
  const auto base = random_values(size_t(mix), rng), scale = random_values(3, rng);
  const auto norm = random_values(size_t(c.dim), rng);
  Backend& g = *be->gpu;
  const Tensor fn_t = g.upload(fn, {mix, flat}), base_t = g.upload(base, {mix}), scale_t = g.upload(scale, {3});
  const Tensor norm_t = g.upload(norm, {c.dim});
  auto rows = [&](int64_t from, int64_t count) {
    const MixWeights m = g.hc_pre(g.upload(std::vector<float>(h.begin() + from * flat, h.begin() + (from + count) * flat),
                                           {count, flat}),
                                  fn_t, base_t, scale_t, norm_t, c);
    return std::vector<std::vector<float>>{g.download(m.x), g.download(m.post), g.download(m.comb)};
  };
  const auto all = rows(0, n);
  const int64_t widths[] = {c.dim, hc, hc * hc};
  std::vector<int64_t> picks;  // every 97th row (each place in a tile of 32 or 64 rows) and the last
  for (int64_t r = 0; r < n; r += 97) picks.push_back(r);
  picks.push_back(n - 1);
  for (const int64_t r : picks) {
    const auto alone = rows(r, 1);
    for (size_t i = 0; i < alone.size(); ++i)
      EXPECT_EQ(alone[i], std::vector<float>(all[i].begin() + r * widths[i], all[i].begin() + (r + 1) * widths[i]))
          << "hc_pre output " << i << " of row " << r << " alone and among " << n << " rows";
  }
}

// ---- MoE routing (identical selections) and experts
// Expert counts of each register width of the router kernel (8, 16, 32 a lane; some not a
// multiple of 32), and logits on a coarse grid so that many scores tie (the lower index wins).
TEST_F(CudaOps, RoutingEveryScoringFunction) {
  ModelConfig c = testing::tiny_config();
  const std::vector<std::pair<int64_t, bool>> cases{{8, false}, {256, false}, {256, true}, {300, true}, {1000, false}};
  for (const auto& [experts, coarse_logits] : cases) {
    const int64_t E = experts;
    const bool coarse = coarse_logits;
    c.n_routed_experts = E;
    c.n_activated_experts = 6;
    const int64_t n = 37, k = 6, vocab = 50;
    auto logits = random_values(size_t(n * E), rng, 2.0f);
    const auto bias = random_values(size_t(E), rng, 0.1f);
    if (coarse)
      for (float& v : logits) v = std::round(v * 2.0f) / 2.0f;
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
        EXPECT_EQ(got.second, want.second) << "experts E=" << E << (coarse ? " (ties)" : "") << " scoring " << int(f)
                                           << " mode " << mode;
        EXPECT_LT(relative_difference(got.first, want.first), 1e-5) << "weights E=" << E << " mode " << mode;
      }
  }
}

TEST_F(CudaOps, RoutedExpertsEveryFormat) {
  for (auto quant : {testing::TinyQuant::bf16, testing::TinyQuant::fp8_mxfp4, testing::TinyQuant::nvfp4}) {
    const TinyModel tiny({.quant = quant});
    const ModelConfig& c = tiny.config;
    const ModelWeights& weights = *tiny.weights;
    const std::string f = "layers.1.ffn.experts.";
    // Both sides of the grouped path's 64 tokens; spread selections, and skewed ones (expert 0 in
    // every token, the last expert in none: ragged and empty groups; needs k + 1 < E).
    for (auto [n, skewed] : std::vector<std::pair<int64_t, bool>>{
             {1, false}, {4, false}, {19, false}, {32, false}, {63, false}, {64, false}, {70, false}, {300, false},
             {40, true}, {301, true}}) {
      const int64_t k = c.n_activated_experts, E = c.n_routed_experts;
      ASSERT_LT(k + 1, E);
      const auto x = random_values(size_t(n * c.dim), rng), rw = random_values(size_t(n * k), rng);
      std::vector<int32_t> sel(static_cast<size_t>(n * k));
      for (int64_t t = 0; t < n; ++t)  // distinct experts per token
        for (int64_t j = 0; j < k; ++j)
          sel[size_t(t * k + j)] = int32_t(skewed ? (j == 0 ? 0 : t % 7 == 0 ? j + 1 : j) : (t + j) % E);
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
      EXPECT_LT(relative_difference(op(*be->gpu), want), kBf16Tolerance)
          << "experts n=" << n << " skewed " << skewed << " quant " << int(quant);
      EXPECT_LT(relative_difference(op(*be->gpu_f32), want), 1e-5) << "experts n=" << n << " skewed " << skewed << " (f32)";
    }
  }
}

// The fused expert GEMMs (expert_gemm.h) past the tiny checkpoints' sizes, in every format they
// take: widths of several 128-input stages, weight blocks cut by the matrix end (inter 384: one
// and a half up blocks; dim 640: one and a quarter down blocks), 64+ tokens with skewed routing
// (expert 0 in every token: full 64-row tiles and a partial one; the last expert in none; the
// others ragged) against the CPU; f32 mode (the cuBLAS path) within 1e-5; and every run's rows
// identical whatever shares the call.
TEST_F(CudaOps, GroupedExpertsLargeShapes) {
  const std::vector<WeightLayout> cases{
      {WeightFormat::dense, DType::bf16, DType::f32},
      {WeightFormat::fp8_block, DType::f8_e4m3, DType::f32},
      {WeightFormat::fp8_block, DType::f8_e4m3, DType::f8_e8m0},
      {WeightFormat::fp8_tensor, DType::f8_e4m3, DType::f32},
      {WeightFormat::mxfp4, DType::u8, DType::f8_e8m0},
      {WeightFormat::nvfp4, DType::u8, DType::f8_e4m3},
  };
  const int64_t E = 8, k = 3, dim = 640, inter = 384;
  const double limit = 2.0;
  for (const WeightLayout& c : cases) {
    std::vector<std::unique_ptr<RandomLinear>> w1, w2, w3;
    for (int64_t e = 0; e < E; ++e) {
      w1.push_back(std::make_unique<RandomLinear>(c.format, c.weight_dtype, c.scale_dtype, inter, dim, rng));
      w2.push_back(std::make_unique<RandomLinear>(c.format, c.weight_dtype, c.scale_dtype, dim, inter, rng));
      w3.push_back(std::make_unique<RandomLinear>(c.format, c.weight_dtype, c.scale_dtype, inter, dim, rng));
    }
    auto load = [&](Backend& b, const std::vector<std::unique_ptr<RandomLinear>>& ws) {
      std::vector<Tensor> out;
      for (const auto& w : ws) out.push_back(b.load_linear(w->w));
      return out;
    };
    struct Loaded {
      std::vector<Tensor> w1, w2, w3;
    };
    const Loaded cpu{load(*be->cpu, w1), load(*be->cpu, w2), load(*be->cpu, w3)};
    const Loaded gpu{load(*be->gpu, w1), load(*be->gpu, w2), load(*be->gpu, w3)};
    const Loaded gpu_f32{load(*be->gpu_f32, w1), load(*be->gpu_f32, w2), load(*be->gpu_f32, w3)};
    // Inputs scaled to gates of about unit size: the limit clamps some, not most.
    const std::vector<float> w1_values = be->cpu->download(cpu.w1[0]);
    double mean_square = 0;
    for (float v : w1_values) mean_square += double(v) * v;
    const float x_scale = float(1.0 / std::sqrt(mean_square / double(w1_values.size()) * double(dim)));
    const std::string what = std::string(weight_format_name(c.format)) + " scales " + std::string(dtype_name(c.scale_dtype));

    auto experts = [&](Backend& b, const Loaded& w, const std::vector<float>& x, const std::vector<float>& rw,
                       const std::vector<int32_t>& sel, int64_t n, RowRuns runs) {
      const Routing r{b.upload(rw, {n, k}), b.upload_i32(sel, {n, k})};
      return b.download(b.experts(b.upload(x, {n, dim}), r, w.w1, w.w2, w.w3, limit, runs));
    };
    auto inputs = [&](int64_t n) {
      std::vector<int32_t> sel(size_t(n * k));
      for (int64_t t = 0; t < n; ++t) {  // distinct experts per token: 0, then two of 1..6
        const int32_t first = int32_t(t % 6);
        sel[size_t(t * k)] = 0;
        sel[size_t(t * k + 1)] = 1 + first;
        sel[size_t(t * k + 2)] = 1 + (first + 1 + int32_t(t / 6 % 5)) % 6;
      }
      std::vector<float> x = random_values(size_t(n * dim), rng, x_scale);
      return std::tuple{std::move(x), random_values(size_t(n * k), rng), std::move(sel)};
    };
    for (int64_t n : {64, 200, 333}) {
      const auto [x, rw, sel] = inputs(n);
      const std::vector<float> want = experts(*be->cpu, cpu, x, rw, sel, n, {});
      EXPECT_LT(relative_difference(experts(*be->gpu, gpu, x, rw, sel, n, {}), want), kBf16Tolerance)
          << what << " n=" << n;
      EXPECT_LT(relative_difference(experts(*be->gpu_f32, gpu_f32, x, rw, sel, n, {}), want), 1e-5)
          << what << " n=" << n << " (f32)";
    }
    const std::vector<int64_t> runs{70, 5, 100};
    const auto [x, rw, sel] = inputs(175);
    const std::vector<float> together = experts(*be->gpu, gpu, x, rw, sel, 175, runs);
    int64_t begin = 0;
    for (int64_t n : runs) {
      auto part = [&](const auto& v, int64_t width) {
        return std::vector<typename std::decay_t<decltype(v)>::value_type>(v.begin() + begin * width,
                                                                          v.begin() + (begin + n) * width);
      };
      const std::vector<float> alone = experts(*be->gpu, gpu, part(x, dim), part(rw, k), part(sel, k), n, {});
      EXPECT_EQ(std::vector<float>(together.begin() + begin * dim, together.begin() + (begin + n) * dim), alone)
          << what << " run of " << n << " at " << begin;
      begin += n;
    }
  }
}

// ---- batch invariance: given the step's rows per sequence (RowRuns), every sequence's rows
// come out bit-identical to that sequence run alone, whatever shares the step (decode kernels
// for short runs, one tensor-core call per long run), in the linear layers and the experts.
TEST_F(CudaOps, RowsDoNotDependOnWhatSharesTheStep) {
  const std::vector<int64_t> runs{1, 3, 70, 1, 9, 100, 1, 64};
  int64_t total = 0;
  for (int64_t n : runs) total += n;
  // rows [begin, begin + n) of a [rows, width] f32 result
  auto rows_of = [](const std::vector<float>& v, int64_t width, int64_t begin, int64_t n) {
    return std::vector<float>(v.begin() + begin * width, v.begin() + (begin + n) * width);
  };
  for (auto quant : {testing::TinyQuant::bf16, testing::TinyQuant::fp8_mxfp4, testing::TinyQuant::nvfp4}) {
    const TinyModel tiny({.quant = quant});
    const ModelConfig& c = tiny.config;
    const ModelWeights& weights = *tiny.weights;
    Backend& b = *be->gpu;
    for (const std::string role : {"layers.1.attn.wq_b", "layers.1.attn.wo_a", "layers.1.ffn.shared_experts.w2", "head"}) {
      const LinearWeight& lw = weights.linear(role);
      const int64_t groups = role.ends_with("wo_a") ? c.o_groups : 1;
      const Tensor w = b.load_linear(lw);
      const auto x = random_values(size_t(total * groups * lw.in), rng);
      auto run = [&](int64_t begin, int64_t n, RowRuns r) {
        const Tensor xt = b.upload(std::vector<float>(x.begin() + begin * groups * lw.in, x.begin() + (begin + n) * groups * lw.in),
                                   {n, groups * lw.in});
        return b.download(groups > 1 ? b.grouped_linear(xt, w, groups, r) : b.linear(xt, w, r));
      };
      const std::vector<float> together = run(0, total, runs);
      int64_t begin = 0;
      for (int64_t n : runs) {
        EXPECT_EQ(rows_of(together, lw.out, begin, n), run(begin, n, {})) << role << " run of " << n << " at " << begin;
        begin += n;
      }
    }
    const std::string f = "layers.1.ffn.experts.";
    std::vector<Tensor> w1, w2, w3;
    for (int64_t e = 0; e < c.n_routed_experts; ++e) {
      w1.push_back(b.load_linear(weights.linear(f + std::to_string(e) + ".w1")));
      w2.push_back(b.load_linear(weights.linear(f + std::to_string(e) + ".w2")));
      w3.push_back(b.load_linear(weights.linear(f + std::to_string(e) + ".w3")));
    }
    const int64_t k = c.n_activated_experts, E = c.n_routed_experts;
    const auto x = random_values(size_t(total * c.dim), rng), rw = random_values(size_t(total * k), rng);
    std::vector<int32_t> sel(static_cast<size_t>(total * k));
    for (int64_t t = 0; t < total; ++t)
      for (int64_t j = 0; j < k; ++j) sel[size_t(t * k + j)] = int32_t((t * 3 + j) % E);
    auto experts = [&](int64_t begin, int64_t n, RowRuns r) {
      auto part = [&](const auto& v, int64_t width) {
        return std::vector<typename std::decay_t<decltype(v)>::value_type>(v.begin() + begin * width, v.begin() + (begin + n) * width);
      };
      const Routing routing{b.upload(part(rw, k), {n, k}), b.upload_i32(part(sel, k), {n, k})};
      return b.download(b.experts(b.upload(part(x, c.dim), {n, c.dim}), routing, w1, w2, w3, 2.0, r));
    };
    const std::vector<float> together = experts(0, total, runs);
    int64_t begin = 0;
    for (int64_t n : runs) {
      EXPECT_EQ(rows_of(together, c.dim, begin, n), experts(begin, n, {})) << "experts, run of " << n << " at " << begin;
      begin += n;
    }
  }
}

// The decode experts of a step whose grid fits one wave run deeper instances (three chunks in
// flight a warp, moe.cu); larger steps the usual ones. A token alone takes the first, the same
// token among 4000 others (8002 pairs: several waves on any GPU) the second: the same bits.
TEST_F(CudaOps, ExpertsAgreeAtEveryLoadDepth) {
  constexpr int64_t kOthers = 4000;
  for (auto quant : {testing::TinyQuant::bf16, testing::TinyQuant::fp8_mxfp4, testing::TinyQuant::nvfp4}) {
    const TinyModel tiny({.quant = quant});
    const ModelConfig& c = tiny.config;
    Backend& b = *be->gpu;
    const std::string f = "layers.1.ffn.experts.";
    std::vector<Tensor> w1, w2, w3;
    for (int64_t e = 0; e < c.n_routed_experts; ++e) {
      w1.push_back(b.load_linear(tiny.weights->linear(f + std::to_string(e) + ".w1")));
      w2.push_back(b.load_linear(tiny.weights->linear(f + std::to_string(e) + ".w2")));
      w3.push_back(b.load_linear(tiny.weights->linear(f + std::to_string(e) + ".w3")));
    }
    const int64_t k = c.n_activated_experts, E = c.n_routed_experts, rows = kOthers + 1;
    const auto x = random_values(size_t(rows * c.dim), rng), rw = random_values(size_t(rows * k), rng);
    std::vector<int32_t> sel(size_t(rows * k));
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t j = 0; j < k; ++j) sel[size_t(t * k + j)] = int32_t((t + j) % E);
    auto experts = [&](int64_t n) {  // the first n rows, a decode step of n sequences
      const Routing routing{b.upload(std::vector<float>(rw.begin(), rw.begin() + n * k), {n, k}),
                            b.upload_i32(std::vector<int32_t>(sel.begin(), sel.begin() + n * k), {n, k})};
      const Tensor xt = b.upload(std::vector<float>(x.begin(), x.begin() + n * c.dim), {n, c.dim});
      const std::vector<int64_t> runs(size_t(n), 1);
      const std::vector<float> y = b.download(b.experts(xt, routing, w1, w2, w3, 2.0, runs));
      return std::vector<float>(y.begin(), y.begin() + c.dim);
    };
    EXPECT_EQ(experts(1), experts(rows)) << "quant " << int(quant);
  }
}

// ---- the ops over the paged state: ragged steps of two sequences and a padding row, every
// cache format; the CPU and the CUDA backends run the same steps on their own paged caches (the
// exact CUDA backend within 1e-4, the default one's bf16 attention within 1e-2).
struct PagedSide {
  Backend& be;
  PagedCache cache;
  std::vector<int32_t> slots;
  // A slot per sequence, each holding its `tokens`.
  PagedSide(Backend& b, const ModelConfig& c, KvCacheDtype kv, IndexerCacheDtype idx, const std::vector<int64_t>& tokens)
      : be(b), cache(b, PagedLayout(c, kv, idx, c.n_layers)) {
    for (const int64_t n : tokens) {
      const int32_t s = slots.emplace_back(cache.acquire_slot());
      for (size_t i = 0; i < cache.layout().streams().size(); ++i)
        cache.reserve(s, int64_t(i), cache.layout().rows(cache.layout().streams()[i], n));
    }
  }
  PagedRows rows(int64_t layer, StreamKind k) { return cache.rows(cache.layout().stream(layer, k)); }
  StepRows step(const std::vector<int32_t>& v, int64_t n) {
    const Tensor t = be.upload_i32(v, {5 * n});
    return {t.rows_view(0, n), t.rows_view(n, n), t.rows_view(2 * n, n), t.rows_view(3 * n, n), t.rows_view(4 * n, n)};
  }
};

std::vector<uint8_t> host_bytes(Backend& b, const Tensor& t) {
  if (b.name() == "cuda") return device_bytes(t);
  return std::vector<uint8_t>(t.data<uint8_t>(), t.data<uint8_t>() + t.numel() * elem_bytes(t.type()));
}

TEST_F(CudaOps, PagedStateOps) {
  ModelConfig c = testing::tiny_config();  // layer 1: CSA (ratio 4), layer 2: HCA (ratio 8)
  const int64_t total = 40, d = c.head_dim, heads = 3, k = 3;
  const std::vector<std::vector<int64_t>> chunks{{5, 1, 9, 1, 1, 3, 12, 1, 1}, {2, 7, 1, 1, 6, 1, 1, 13, 1}};
  for (KvCacheDtype kvt : {KvCacheDtype::f32, KvCacheDtype::bf16, KvCacheDtype::fp8}) {
    const IndexerCacheDtype it = kvt == KvCacheDtype::fp8 ? IndexerCacheDtype::fp4
                                 : kvt == KvCacheDtype::bf16 ? IndexerCacheDtype::bf16 : IndexerCacheDtype::f32;
    // gpu: the exact backend (f32 attention), fast: the default one (bf16 tensor-core attention)
    PagedSide cpu(*be->cpu, c, kvt, it, {total, total}), gpu(*be->gpu_f32, c, kvt, it, {total, total}),
        fast(*be->gpu, c, kvt, it, {total, total});
    int64_t length[2] = {0, 0};
    for (size_t step = 0; step < chunks[0].size(); ++step) {
      // rows: sequence 0's tokens, one padding row, sequence 1's tokens
      std::vector<int32_t> slot, pos, start, last, first;
      auto add_sequence = [&](int which, int64_t n) {
        const int32_t row0 = int32_t(slot.size());
        for (int64_t j = 0; j < n; ++j) {
          slot.push_back(cpu.slots[which]);
          pos.push_back(int32_t(length[which] + j));
          start.push_back(int32_t(length[which]));
          last.push_back(int32_t(length[which] + n - 1));
          first.push_back(row0);
        }
        length[which] += n;
      };
      add_sequence(0, chunks[0][step]);
      slot.push_back(-1), pos.push_back(0), start.push_back(0), last.push_back(0), first.push_back(int32_t(first.size()));
      add_sequence(1, chunks[1][step]);
      ASSERT_EQ(gpu.slots, cpu.slots);
      ASSERT_EQ(fast.slots, cpu.slots);
      const int64_t n = int64_t(slot.size());
      std::vector<int32_t> at = slot;
      for (const auto* v : {&pos, &start, &last, &first}) at.insert(at.end(), v->begin(), v->end());
      const std::string where = "kv " + std::to_string(int(kvt)) + " step " + std::to_string(step);

      for (int64_t layer : {1, 2}) {
        const int64_t ratio = c.compress_ratios[size_t(layer)];
        const bool csa = ratio == 4;
        const int64_t width = compressor_width(c, ratio, false);
        const auto kv = random_values(size_t(n * d), rng), entries = random_values(size_t(n * d), rng);
        const auto ck = random_values(size_t(n * width), rng), cg = random_values(size_t(n * width), rng);
        const auto ape = random_values(size_t(ratio * width), rng);
        auto q = random_values(size_t(n * heads * d), rng, 0.3f);
        const auto sinks = random_values(size_t(heads), rng);
        std::vector<int32_t> sel(size_t(n * k), -1);
        for (int64_t r = 0; r < n; ++r)
          for (int64_t j = 0; j < k; ++j)
            if (const int64_t e = (pos[size_t(r)] + 1) / ratio; e > 0 && (j + r) % 3 != 2) sel[size_t(r * k + j)] = int32_t(rng() % e);
        // the step's runs: where every sequence has one row (steps 3 and 8) the CUDA compressor
        // pools and keeps in one launch, and the later steps pool what it kept
        const std::vector<int64_t> runs{chunks[0][step], 1, chunks[1][step]};
        auto run = [&](PagedSide& side) {
          Backend& b = side.be;
          const StepRows rows = side.step(at, n);
          std::vector<std::vector<float>> out;
          out.push_back(b.download(b.compress(side.rows(layer, StreamKind::compressor_pending), b.upload(ck, {n, width}),
                                              b.upload(cg, {n, width}), b.upload(ape, {ratio, width}), rows, ratio, csa,
                                              runs)));
          const Tensor step_entries = b.encode_kv(b.upload(entries, {n, d}), kvt, c.rope_dim);
          b.store_rows(side.rows(layer, StreamKind::compressed), step_entries, rows, {0, ratio});
          const Tensor step_kv = b.encode_kv(b.upload(kv, {n, d}), kvt, c.rope_dim);
          const Tensor selected = b.upload_i32(sel, {n, k});
          const PagedRows window = side.rows(layer, StreamKind::window), compressed = side.rows(layer, StreamKind::compressed);
          const AttentionShape shape{kvt, d, c.rope_dim, c.window, ratio, 1.0 / std::sqrt(double(d))};
          out.push_back(b.download(b.attention(b.upload(q, {n, heads * d}), step_kv, window, &compressed, &step_entries,
                                               csa ? &selected : nullptr, b.upload(sinks, {heads}), rows, shape)));
          b.store_rows(window, step_kv, rows, {c.window, 0});
          return out;
        };
        const auto want = run(cpu), got = run(gpu), got_fast = run(fast);
        EXPECT_LT(relative_difference(got[0], want[0]), kF32Tolerance) << "compress layer " << layer << " " << where;
        EXPECT_LT(relative_difference(got[1], want[1]), kF32Tolerance) << "attention layer " << layer << " " << where;
        EXPECT_LT(relative_difference(got_fast[0], want[0]), kF32Tolerance) << "compress layer " << layer << " " << where
                                                                            << " (default)";
        EXPECT_LT(relative_difference(got_fast[1], want[1]), kBf16Tolerance) << "attention layer " << layer << " " << where
                                                                             << " (default)";
        for (size_t i = 0; i < want[0].size(); ++i)  // rows completing no window are exactly zero
          if (want[0][i] == 0) {
            EXPECT_EQ(got[0][i], 0.0f) << where;
          }
      }

      // indexer keys (CSA layer 1) and the top-k over them: no ties (every key leans along u,
      // head 0 of every query is u, head weights positive)
      const int64_t ih = 4, id = c.index_head_dim;
      auto keys = random_values(size_t(n * id), rng), iq = random_values(size_t(n * ih * id), rng);
      auto w = random_values(size_t(n * ih), rng);
      for (float& x : keys) x += 6.0f / std::sqrt(float(id));
      for (int64_t r = 0; r < n; ++r)
        for (int64_t i = 0; i < id; ++i) iq[size_t(r * ih * id + i)] = 1.0f / std::sqrt(float(id));
      for (float& x : w) x = std::fabs(x) + 0.1f;
      for (int64_t topk : {1, 3, 16}) {
        auto run = [&](PagedSide& side) {
          Backend& b = side.be;
          const StepRows rows = side.step(at, n);
          const PagedRows kr = side.rows(1, StreamKind::indexer_keys);
          if (topk == 1) b.store_rows(kr, b.encode_indexer(b.upload(keys, {n, id}), it), rows, {0, 4});
          return b.download_i32(b.indexer_topk(b.indexer_query(b.upload(iq, {n, ih * id}), it, id), b.upload(w, {n, ih}), kr, it,
                                               rows, ih, topk, 4, 0.125));
        };
        std::vector<int32_t> got = run(gpu), want = run(cpu);
        if (it == IndexerCacheDtype::fp4)  // fp4 keys tie exactly: the same picks, in either order among equals
          for (int64_t r = 0; r < n; ++r) {
            std::sort(got.begin() + r * topk, got.begin() + (r + 1) * topk);
            std::sort(want.begin() + r * topk, want.begin() + (r + 1) * topk);
          }
        EXPECT_EQ(got, want) << "indexer top-" << topk << " " << where;
      }
    }
    // the stored state itself, byte for byte
    const PagedRows pc = cpu.rows(1, StreamKind::window), pg = gpu.rows(1, StreamKind::window);
    EXPECT_EQ(host_bytes(*be->gpu_f32, pg.pool), host_bytes(*be->cpu, pc.pool)) << "pool kv " << int(kvt);
  }
}

// ---- attention at V4 geometry (64 heads × 512 dims, rope 64, window 128, 512 CSA picks, HCA
// ratio 128): one step of rows of several sequences: a first token, decode rows, a chunk whose
// window spans the ring and the step, a row whose HCA list takes several key tiles per split, a
// shorter one that takes more splits than the longest list would (15 tiles: 15 splits of one,
// where 17 tiles take 9 of two), a
// run long enough for the whole-list kernel (completing CSA entries and HCA's first), a sequence
// that starts in the step (every key in the step: copied straight into the key tiles); CSA picks
// with empty (-1) entries; fp8 and f32 caches. The exact backend within 1e-4 of the CPU, the
// default one within 1e-2, and each sequence's rows bit-identical whether it runs alone or with
// the others.
TEST_F(CudaOps, AttentionAtV4Geometry) {
  ModelConfig c = testing::tiny_config();
  c.n_layers = 3;
  c.head_dim = 512, c.rope_dim = 64, c.window = 128;
  c.compress_ratios = {0, 4, 128};
  c.hash_routed = {true, false, false};
  const int64_t d = c.head_dim, k = 512, csa_stored = 2048;  // CSA picks among the first 2048 entries
  std::vector<float> inv_freq(size_t(c.rope_dim / 2));
  for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * float(i) / float(c.rope_dim));
  struct Sequence {
    int64_t cached, rows;
  };
  const std::vector<Sequence> seqs{{0, 1}, {300, 1}, {1000, 5}, {120000, 1}, {100, 70}, {5000, 3}, {0, 140}, {100000, 1}};
  std::vector<int64_t> tokens, runs, row0;
  std::vector<int32_t> slot, pos, start, last, first;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const auto [cached, rows] = seqs[i];
    tokens.push_back(cached + rows);
    row0.push_back(int64_t(slot.size()));
    runs.push_back(rows);
    for (int64_t j = 0; j < rows; ++j) {
      slot.push_back(int32_t(i));  // checked against each side's slots below
      pos.push_back(int32_t(cached + j));
      start.push_back(int32_t(cached));
      last.push_back(int32_t(cached + rows - 1));
      first.push_back(int32_t(row0.back()));
    }
    if (i == 0) {  // a padding row
      slot.push_back(-1), pos.push_back(0), start.push_back(0), last.push_back(0), first.push_back(int32_t(slot.size() - 1));
      runs.push_back(1);
    }
  }
  const int64_t n = int64_t(slot.size());
  // StepRows of rows [begin, begin + count), the first rows counted from `begin`
  auto step_rows = [&](int64_t begin, int64_t count) {
    std::vector<int32_t> at;
    for (const auto* v : {&slot, &pos, &start, &last})
      at.insert(at.end(), v->begin() + begin, v->begin() + begin + count);
    for (int64_t r = begin; r < begin + count; ++r) at.push_back(int32_t(first[size_t(r)] - begin));
    return at;
  };
  auto rows_of = [](const auto& v, int64_t width, int64_t begin, int64_t count) {
    return std::vector<typename std::decay_t<decltype(v)>::value_type>(v.begin() + begin * width,
                                                                        v.begin() + (begin + count) * width);
  };

  for (KvCacheDtype kvt : {KvCacheDtype::fp8, KvCacheDtype::f32}) {
    const IndexerCacheDtype it = IndexerCacheDtype::f32;
    PagedSide cpu(*be->cpu, c, kvt, it, tokens), exact(*be->gpu_f32, c, kvt, it, tokens), fast(*be->gpu, c, kvt, it, tokens),
        portable(*be->gpu_mma, c, kvt, it, tokens);
    ASSERT_EQ(exact.slots, cpu.slots);
    ASSERT_EQ(fast.slots, cpu.slots);
    ASSERT_EQ(portable.slots, cpu.slots);
    for (size_t i = 0; i < seqs.size(); ++i) ASSERT_EQ(cpu.slots[i], int32_t(i));
    // unit 2^16 (keys that large, queries that small, the same scores): fp8 scales above 2^7,
    // which the tensor-core kernel decodes on its f32 path
    for (const auto& [layer, unit] :
         std::initializer_list<std::pair<int64_t, float>>{{0, 1.0f}, {1, 1.0f}, {2, 1.0f}, {1, 65536.0f}}) {
      if (unit != 1.0f && kvt != KvCacheDtype::fp8) continue;
      const int64_t ratio = c.compress_ratios[size_t(layer)];
      const int64_t heads = layer == 0 ? 80 : 64;  // 80: a second, partial group of 64 heads
      const std::string where =
          "kv " + std::to_string(int(kvt)) + " layer " + std::to_string(layer) + " unit " + std::to_string(unit);
      // the cached state: each sequence's ring, then its entries (CSA: those it may pick)
      std::vector<int32_t> fill_at[2];
      for (size_t i = 0; i < seqs.size(); ++i) {
        const int64_t cached = seqs[i].cached, entries = ratio == 0 ? 0 : tokens[i] / ratio;
        auto add = [&](std::vector<int32_t>& at, int64_t p, int64_t last_position) {
          at.insert(at.end(), {int32_t(i), int32_t(p), int32_t(p), int32_t(last_position), 0});
        };
        for (int64_t p = std::max<int64_t>(0, cached - c.window); p < cached; ++p) add(fill_at[0], p, cached - 1);
        const int64_t stored = ratio == 4 ? std::min(entries, csa_stored) : entries;
        for (int64_t e = 0; e < stored; ++e) add(fill_at[1], (e + 1) * ratio - 1, 0);
      }
      std::vector<float> fill_values[2];
      for (int f = 0; f < 2; ++f) fill_values[f] = random_values(fill_at[f].size() / 5 * size_t(d), rng, unit);
      // The entries the step's rows complete, as a step stores them (row r: the entry its position
      // completes, zeros elsewhere), for the attention that reads them there.
      std::vector<float> own_entries(size_t(n * d), 0.0f);
      const int64_t filled = int64_t(fill_at[1].size() / 5);
      for (int64_t r = 0; r < n; ++r) {
        const int64_t t = pos[size_t(r)];
        if (slot[size_t(r)] < 0 || ratio == 0 || (t + 1) % ratio != 0) continue;
        // fill_at[1]'s row of (sequence slot[r], the entry position t completes), if the fill stored it
        int64_t i = 0;
        while (i < filled && !(fill_at[1][size_t(5 * i)] == slot[size_t(r)] && fill_at[1][size_t(5 * i + 1)] == t)) ++i;
        if (i < filled) std::copy_n(fill_values[1].begin() + i * d, d, own_entries.begin() + r * d);
      }
      auto fill = [&](PagedSide& side) {
        Backend& b = side.be;
        for (int f = 0; f < 2; ++f) {
          const int64_t m = int64_t(fill_at[f].size() / 5);
          if (m == 0 || (f == 1 && ratio == 0)) continue;
          std::vector<int32_t> at;  // the fields one after another, as StepRows takes them
          for (int field = 0; field < 5; ++field)
            for (int64_t r = 0; r < m; ++r) at.push_back(fill_at[f][size_t(5 * r + field)]);
          b.store_rows(side.rows(layer, f == 0 ? StreamKind::window : StreamKind::compressed),
                       b.encode_kv(b.upload(fill_values[f], {m, d}), kvt, c.rope_dim), side.step(at, m),
                       f == 0 ? RowPlacement{c.window, 0} : RowPlacement{0, ratio});
        }
      };
      for (PagedSide* side : {&cpu, &exact, &fast, &portable}) fill(*side);

      // the step: kv rows, queries, sinks, picks (every eighth none; none at all before the first entry)
      const auto kv = random_values(size_t(n * d), rng, unit);
      const auto q = random_values(size_t(n * heads * d), rng, 1.0f / unit);
      const auto sinks = random_values(size_t(heads), rng);
      std::vector<int32_t> selected(size_t(n * k), -1);
      for (int64_t r = 0; r < n; ++r)
        if (const int64_t visible = std::min<int64_t>((pos[size_t(r)] + 1) / 4, csa_stored); visible > 0)
          for (int64_t j = 0; j < k; ++j)
            if (j % 8 != 5) selected[size_t(r * k + j)] = int32_t(rng() % uint32_t(visible));
      // rotated: the output rotated back within the op (AttentionShape::output_inv_freq)
      // with_entries: the step's own entries passed too (the same keys, read there by the GPU)
      auto attend = [&](PagedSide& side, int64_t begin, int64_t count, RowRuns r, bool rotated = false,
                        bool with_entries = false) {
        Backend& b = side.be;
        const Tensor step_kv = b.encode_kv(b.upload(rows_of(kv, d, begin, count), {count, d}), kvt, c.rope_dim);
        const Tensor step_entries =
            b.encode_kv(b.upload(rows_of(own_entries, d, begin, count), {count, d}), kvt, c.rope_dim);
        const Tensor picks = b.upload_i32(rows_of(selected, k, begin, count), {count, k});
        const PagedRows window = side.rows(layer, StreamKind::window);
        const PagedRows compressed = ratio > 0 ? side.rows(layer, StreamKind::compressed) : PagedRows{};
        const Tensor freq = b.upload(inv_freq, {c.rope_dim / 2});
        const AttentionShape shape{kvt, d, c.rope_dim, c.window, ratio, 1.0 / std::sqrt(double(d)),
                                   rotated ? &freq : nullptr};
        return b.download(b.attention(b.upload(rows_of(q, heads * d, begin, count), {count, heads * d}), step_kv, window,
                                      ratio > 0 ? &compressed : nullptr,
                                      with_entries && ratio > 0 ? &step_entries : nullptr, ratio == 4 ? &picks : nullptr,
                                      b.upload(sinks, {heads}), side.step(step_rows(begin, count), count), shape, r));
      };
      // The output rotated within the op: the same bits as the op, then an inverse rope pass, for
      // every kernel (the split ones rotate in their combine; the rows of 70 take the whole-list one).
      auto rotated_after = [&](PagedSide& side, const std::vector<float>& o) {
        Backend& b = side.be;
        Tensor t = b.upload(o, {n, heads * d});
        b.rope(t, b.upload_i32(pos, {n}), b.upload(inv_freq, {c.rope_dim / 2}), d, true);
        return b.download(t);
      };
      const std::vector<float> want = attend(cpu, 0, n, runs);
      EXPECT_EQ(attend(cpu, 0, n, runs, true), rotated_after(cpu, want)) << where << " (cpu, rotated)";
      const std::vector<float> exact_out = attend(exact, 0, n, runs);
      EXPECT_LT(relative_difference(exact_out, want), kF32Tolerance) << where << " (exact)";
      EXPECT_EQ(attend(exact, 0, n, runs, true), rotated_after(exact, exact_out)) << where << " (exact, rotated)";
      // each tensor-core family (warpgroup MMA on a Hopper, mma.sync): near the CPU, and every
      // sequence's rows the same bits alone as among the others
      for (PagedSide* side : {&fast, &portable}) {
        const std::string family = where + (side == &fast ? " (default kernels)" : " (mma.sync)");
        const std::vector<float> together = attend(*side, 0, n, runs);
        EXPECT_LT(relative_difference(together, want), kBf16Tolerance) << family;
        EXPECT_EQ(attend(*side, 0, n, runs, true), rotated_after(*side, together)) << family << " (rotated)";
        // one run of every row: the whole-list kernel for all
        const std::vector<float> one_run = attend(*side, 0, n, {});
        EXPECT_LT(relative_difference(one_run, want), kBf16Tolerance) << family << " (one run)";
        // the step's keys copied as bf16 rows decoded once (fp8) rather than decoded per query:
        // the same bits
        EXPECT_EQ(attend(*side, 0, n, runs, false, true), together) << family << " (own entries)";
        EXPECT_EQ(attend(*side, 0, n, {}, false, true), one_run) << family << " (one run, own entries)";
        for (size_t i = 0; i < seqs.size(); ++i) {
          const int64_t b = row0[i], count = seqs[i].rows;
          const std::vector<float> alone = attend(*side, b, count, {});
          EXPECT_EQ(rows_of(together, heads * d, b, count), alone) << family << " sequence " << i;
          EXPECT_EQ(attend(*side, b, count, {}, false, true), alone) << family << " sequence " << i << " (own entries)";
          EXPECT_LT(relative_difference(alone, rows_of(want, heads * d, b, count)), kBf16Tolerance)
              << family << " sequence " << i;
        }
      }
    }
  }
}

// The paged view of `pool` (a stored row per pool row) through block tables of two slots × `width` blocks.
PagedRows table_rows(Backend& b, Tensor pool, const std::vector<int32_t>& tables, int64_t width, int64_t rows_per_block,
                     int64_t capacity) {
  PagedRows p;
  p.row_bytes = int64_t(pool.numel() * elem_bytes(pool.type())) / pool.rows();
  p.pool = std::move(pool);
  p.tables = b.upload_i32(tables, {2, width});
  p.width = width, p.rows_per_block = rows_per_block, p.block_bytes = rows_per_block * p.row_bytes, p.capacity = capacity;
  return p;
}

// ---- the indexer's top-k at long rows: dyadic keys, queries and weights make every score exact
// in float and double alike, so the test knows each score. Rows of 0 .. 70000 visible keys,
// k above and below the key count (1024, V4-Pro's, more winners than the select's threads), two
// sequences with different block tables, many exact ties (repeated keys, all-ReLU-zero scores)
// and negative scores. The GPU must pick exactly by
// "score descending, ties to the lower index"; the CPU (torch's order among ties) must pick the
// same scores in the same places.
TEST_F(CudaOps, IndexerTopkLongRows) {
  const int64_t d = 64, heads = 4, ratio = 4, rows_per_block = 64, distinct = 3000;
  const std::vector<int64_t> counts{1, 511, 512, 513, 5000, 70000, 3, 0, 70000, 300};
  const int64_t blocks = (70000 + rows_per_block - 1) / rows_per_block, capacity = blocks * rows_per_block;
  auto dyadic = [&](float step, int levels) { return step * float(int(rng() % uint32_t(2 * levels + 1)) - levels); };
  for (IndexerCacheDtype it : {IndexerCacheDtype::f32, IndexerCacheDtype::bf16, IndexerCacheDtype::fp4}) {
    const float step = it == IndexerCacheDtype::fp4 ? 0.5f : 0.25f;
    const int levels = it == IndexerCacheDtype::fp4 ? 2 : 4;
    std::vector<float> base(size_t(distinct * d)), keys(size_t(2 * capacity * d)), q(counts.size() * heads * d), w;
    for (float& x : base) x = dyadic(step, levels);
    for (int64_t c = 0; c < 2 * capacity; ++c) {  // every key repeats one of `distinct`
      const int64_t from = int64_t(rng() % uint32_t(distinct));
      std::copy_n(base.begin() + from * d, d, keys.begin() + c * d);
    }
    for (float& x : q) x = dyadic(step, levels);
    for (size_t i = 0; i < counts.size() * heads; ++i) w.push_back(std::array{-1.0f, -0.5f, 0.5f, 1.0f, 2.0f}[rng() % 5]);
    // slot 0: blocks 0 .. blocks-1 in order; slot 1: the other half of the pool, blocks reversed
    std::vector<int32_t> tables(size_t(2 * blocks));
    for (int64_t b = 0; b < blocks; ++b) tables[size_t(b)] = int32_t(b), tables[size_t(2 * blocks - 1 - b)] = int32_t(blocks + b);
    const int64_t n = int64_t(counts.size());
    std::vector<int32_t> at(size_t(5 * n));
    for (int64_t r = 0; r < n; ++r) {
      const int64_t c = counts[size_t(r)];
      const int32_t position = int32_t(c * ratio - 1 + int64_t(rng() % ratio) + (c == 0 ? 1 : 0));
      at[size_t(r)] = r == 7 ? -1 : int32_t(r % 2);                     // slot (row 7: padding)
      at[size_t(n + r)] = position;                                      // position
      at[size_t(2 * n + r)] = 0;                                         // start
      at[size_t(3 * n + r)] = r == 9 ? position + 4 * 600 : position;    // last: row 9 sees part of its step
      at[size_t(4 * n + r)] = int32_t(r);                                // first row
    }
    auto paged = [&](Backend& b, Tensor pool) {
      return table_rows(b, std::move(pool), tables, blocks, rows_per_block, capacity);
    };
    // the scores as both backends see them: decoded keys and round-tripped queries
    Backend& cpu = *be->cpu;
    const Tensor cpu_pool = cpu.encode_indexer(cpu.upload(keys, {2 * capacity, d}), it);
    const std::vector<float> decoded = cpu.download(cpu.decode_indexer(cpu_pool, it, d));
    const std::vector<float> query = cpu.download(cpu.indexer_query(cpu.upload(q, {n, heads * d}), it, d));
    for (int64_t k : {512, 7, 1024}) {
      auto topk = [&](Backend& b, Tensor pool) {
        const PagedRows p = paged(b, std::move(pool));
        const Tensor t = b.upload_i32(at, {5 * n});
        const StepRows rows{t.rows_view(0, n), t.rows_view(n, n), t.rows_view(2 * n, n), t.rows_view(3 * n, n), t.rows_view(4 * n, n)};
        return b.download_i32(b.indexer_topk(b.indexer_query(b.upload(q, {n, heads * d}), it, d), b.upload(w, {n, heads}), p, it,
                                             rows, heads, k, ratio, 0.125));
      };
      const std::vector<int32_t> want = topk(cpu, cpu_pool);
      const std::vector<int32_t> got = topk(*be->gpu_f32, be->gpu_f32->encode_indexer(be->gpu_f32->upload(keys, {2 * capacity, d}), it));
      for (int64_t r = 0; r < n; ++r) {
        const int64_t visible = at[size_t(r)] < 0 ? 0 : (at[size_t(n + r)] + 1) / ratio;
        std::vector<std::pair<double, int32_t>> scored;
        std::vector<double> score_of;
        for (int64_t c = 0; c < visible; ++c) {
          const int32_t slot = at[size_t(r)];
          const int64_t row = int64_t(tables[size_t(slot * blocks + c / rows_per_block)]) * rows_per_block + c % rows_per_block;
          double s = 0;
          for (int64_t h = 0; h < heads; ++h) {
            double qk = 0;
            for (int64_t i = 0; i < d; ++i) qk += double(query[size_t((r * heads + h) * d + i)]) * decoded[size_t(row * d + i)];
            s += std::max(qk, 0.0) * double(w[size_t(r * heads + h)]) * 0.125;
          }
          scored.emplace_back(float(s), int32_t(c));
          score_of.push_back(float(s));
        }
        std::sort(scored.begin(), scored.end(), [](auto& a, auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
        const std::string where = "format " + std::to_string(int(it)) + " k " + std::to_string(k) + " row " + std::to_string(r);
        for (int64_t j = 0; j < k; ++j) {
          const int32_t expect = j < int64_t(scored.size()) ? scored[size_t(j)].second : -1;
          const int32_t g = got[size_t(r * k + j)], c = want[size_t(r * k + j)];
          ASSERT_EQ(g, expect) << where << " pick " << j;
          ASSERT_EQ(c < 0, expect < 0) << where << " pick " << j;
          ASSERT_LT(c, visible) << where << " pick " << j;
          if (expect >= 0) {
            ASSERT_EQ(score_of[size_t(c)], scored[size_t(j)].first) << where << " cpu pick " << j;
          }
        }
      }
    }
  }
}

// ---- the indexer on the default numerics (tensor-core scores) at V4-Flash shapes: 64 heads of
// 128, ratio 4, keys of two sequences in a pool of 37-row blocks (the kernels' 64-key tiles
// straddle blocks), slot 1's blocks in reverse order.
struct V4IndexerKeys {
  static constexpr int64_t kHeads = 64, kDim = 128, kRatio = 4, kTopk = 512, kRowsPerBlock = 37, kCapacity = 2048;
  static constexpr int64_t kBlocks = (kCapacity + kRowsPerBlock - 1) / kRowsPerBlock, kPoolRows = 2 * kBlocks * kRowsPerBlock;
  std::vector<int32_t> tables = std::vector<int32_t>(size_t(2 * kBlocks));
  V4IndexerKeys() {
    for (int64_t b = 0; b < kBlocks; ++b) tables[size_t(b)] = int32_t(b), tables[size_t(2 * kBlocks - 1 - b)] = int32_t(kBlocks + b);
  }
  // The pool row of key c of slot s.
  int64_t pool_row(int32_t slot, int64_t c) const {
    return int64_t(tables[size_t(slot * kBlocks + c / kRowsPerBlock)]) * kRowsPerBlock + c % kRowsPerBlock;
  }
  PagedRows rows(Backend& b, Tensor pool) const {
    return table_rows(b, std::move(pool), tables, kBlocks, kRowsPerBlock, kCapacity);
  }
  // Rows (slot, position) of one step, each its own sequence's only row; the i32 layout of StepRows.
  static std::vector<int32_t> step(const std::vector<std::pair<int32_t, int32_t>>& rows) {
    const size_t n = rows.size();
    std::vector<int32_t> at(5 * n);
    for (size_t r = 0; r < n; ++r) {
      at[r] = rows[r].first;
      at[n + r] = at[3 * n + r] = rows[r].second;  // position, last
      at[2 * n + r] = rows[r].second;               // start
      at[4 * n + r] = int32_t(r);                   // first row
    }
    return at;
  }
  static StepRows step_rows(Backend& b, const std::vector<int32_t>& at) {
    const int64_t n = int64_t(at.size()) / 5;
    const Tensor t = b.upload_i32(at, {5 * n});
    return {t.rows_view(0, n), t.rows_view(n, n), t.rows_view(2 * n, n), t.rows_view(3 * n, n), t.rows_view(4 * n, n)};
  }
  static int64_t visible(const std::pair<int32_t, int32_t>& row) { return row.first < 0 ? 0 : (row.second + 1) / kRatio; }
};

// The raw scores of cuda::paged_indexer_scores (the op's first pass) against a double-precision
// reference on the keys and queries as stored: within 1e-2 on the tensor cores (bf16 queries and
// f32 keys; fp4 keys and queries are exact in bf16, so within f32 summation there), within 1e-4
// in f32; scores past a row's visible keys untouched; every row's scores bit-identical when it
// runs alone (another grid, another batch).
TEST_F(CudaOps, IndexerScoresV4Shapes) {
  using K = V4IndexerKeys;
  const K paged;
  const std::vector<std::pair<int32_t, int32_t>> rows{{0, 8191}, {1, 8190}, {0, 4096}, {1, 255}, {-1, 4000},
                                                      {0, 2},    {1, 6999}, {0, 3},    {1, 65 * 4 + 1}};
  const int64_t n = int64_t(rows.size());
  const float weight_scale = 1.0f / std::sqrt(float(K::kHeads));
  for (IndexerCacheDtype it : {IndexerCacheDtype::f32, IndexerCacheDtype::bf16, IndexerCacheDtype::fp4}) {
    const auto keys = random_values(size_t(K::kPoolRows * K::kDim), rng), q = random_values(size_t(n * K::kHeads * K::kDim), rng);
    const auto w = random_values(size_t(n * K::kHeads), rng);
    Backend& cpu = *be->cpu;
    Backend& gpu = *be->gpu;
    const std::vector<float> decoded =
        cpu.download(cpu.decode_indexer(cpu.encode_indexer(cpu.upload(keys, {K::kPoolRows, K::kDim}), it), it, K::kDim));
    const std::vector<float> query = cpu.download(cpu.indexer_query(cpu.upload(q, {n, K::kHeads * K::kDim}), it, K::kDim));

    const PagedRows pool = paged.rows(gpu, gpu.encode_indexer(gpu.upload(keys, {K::kPoolRows, K::kDim}), it));
    const Tensor gq = gpu.indexer_query(gpu.upload(q, {n, K::kHeads * K::kDim}), it, K::kDim);
    const Tensor gw = gpu.upload(w, {n, K::kHeads});
    const cuda::PagedView view{pool.pool.data<uint8_t>(), pool.tables.data<int32_t>(), pool.width, 0, pool.rows_per_block,
                               pool.row_bytes, pool.block_bytes};
    const cuda::RowFormat format = it == IndexerCacheDtype::f32    ? cuda::RowFormat::f32
                                   : it == IndexerCacheDtype::bf16 ? cuda::RowFormat::bf16
                                                                   : cuda::RowFormat::fp4_indexer;
    // rows [first, first + count) of the step, scored on the legacy stream once the backend's is done
    auto scores = [&](int64_t first, int64_t count, bool bf16_inputs) {
      const std::vector<int32_t> at = K::step({rows.begin() + first, rows.begin() + first + count});
      const Tensor t = gpu.upload_i32(at, {5 * count});
      const int32_t* a = t.data<int32_t>();
      cuda::DeviceBuffer scratch(size_t(count * K::kCapacity) * sizeof(float));
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(cudaMemset(scratch.get(), 0xFF, scratch.bytes()), cudaSuccess);  // NaN: untouched
      cuda::paged_indexer_scores(gq.data<float>() + first * K::kHeads * K::kDim, gw.data<float>() + first * K::kHeads, view,
                                 format, count, {a, a + count, a + 2 * count, a + 3 * count, a + 4 * count}, K::kHeads,
                                 K::kDim, K::kRatio, weight_scale, bf16_inputs, scratch.get<float>(), K::kCapacity, nullptr);
      std::vector<float> out(size_t(count * K::kCapacity));
      EXPECT_EQ(cudaMemcpy(out.data(), scratch.get(), out.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
      return out;
    };
    std::vector<std::vector<float>> want(static_cast<size_t>(n));  // per row, its visible keys
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < K::visible(rows[size_t(r)]); ++c) {
        const float* key = decoded.data() + paged.pool_row(rows[size_t(r)].first, c) * K::kDim;
        double s = 0;
        for (int64_t h = 0; h < K::kHeads; ++h) {
          double qk = 0;
          for (int64_t i = 0; i < K::kDim; ++i) qk += double(query[size_t((r * K::kHeads + h) * K::kDim + i)]) * key[i];
          s += std::max(qk, 0.0) * double(w[size_t(r * K::kHeads + h)]) * weight_scale;
        }
        want[size_t(r)].push_back(float(s));
      }
    for (bool bf16_inputs : {true, false}) {
      const std::vector<float> together = scores(0, n, bf16_inputs);
      for (int64_t r = 0; r < n; ++r) {
        const std::string where = "format " + std::to_string(int(it)) + (bf16_inputs ? " bf16" : " f32") + " row " + std::to_string(r);
        const int64_t visible = K::visible(rows[size_t(r)]);
        const std::vector<float> got(together.begin() + r * K::kCapacity, together.begin() + r * K::kCapacity + visible);
        const bool exact_inputs = !bf16_inputs || it == IndexerCacheDtype::fp4;
        EXPECT_LT(relative_difference(got, want[size_t(r)]), exact_inputs ? kF32Tolerance : kBf16Tolerance) << where;
        for (int64_t c = visible; c < K::kCapacity; ++c)
          if (!std::isnan(together[size_t(r * K::kCapacity + c)])) {
            ADD_FAILURE() << where << ": key " << c << " past the visible " << visible << " written";
            break;
          }
        const std::vector<float> alone = scores(r, 1, bf16_inputs);
        EXPECT_EQ(0, std::memcmp(alone.data(), together.data() + r * K::kCapacity, size_t(visible) * sizeof(float)))
            << where << ": differs when the row runs alone";
      }
    }
  }
}

// The default backend's top-k picks the same keys as the CPU (and the exact mode) when the
// scores are well separated: per sequence, 512 keys among the first 1024 lean strongly along
// every head's query direction, the rest are small noise; rows see 0, 100 (fewer than k), 1024,
// 1500 and 2048 keys. Within the 512 the order may differ (close scores): sets are compared.
TEST_F(CudaOps, IndexerTopkDefaultNumericsSeparatedScores) {
  using K = V4IndexerKeys;
  const K paged;
  const std::vector<std::pair<int32_t, int32_t>> rows{{0, 4095}, {1, 5999}, {0, 8191}, {1, 399}, {0, 2}, {-1, 100}, {1, 8191}};
  const int64_t n = int64_t(rows.size());
  std::normal_distribution<float> noise(0.0f, 0.02f);
  std::vector<float> u(size_t(K::kDim));
  for (float& x : u) x = noise(rng);
  double norm = 0;
  for (float x : u) norm += double(x) * x;
  for (float& x : u) x = float(x / std::sqrt(norm));
  std::vector<float> keys(size_t(K::kPoolRows * K::kDim)), q(size_t(n * K::kHeads * K::kDim)), w(size_t(n * K::kHeads));
  for (int32_t slot : {0, 1}) {
    std::vector<int64_t> first(1024);
    std::iota(first.begin(), first.end(), 0);
    std::shuffle(first.begin(), first.end(), rng);
    std::vector<bool> high(size_t(K::kCapacity));
    for (int64_t j = 0; j < K::kTopk; ++j) high[size_t(first[size_t(j)])] = true;
    for (int64_t c = 0; c < K::kCapacity; ++c)
      for (int64_t i = 0; i < K::kDim; ++i)
        keys[size_t(paged.pool_row(slot, c) * K::kDim + i)] = (high[size_t(c)] ? 3.0f * u[size_t(i)] : 0.0f) + noise(rng);
  }
  for (size_t i = 0; i < q.size(); ++i) q[i] = u[i % size_t(K::kDim)] + noise(rng);
  for (float& x : w) x = std::fabs(noise(rng)) * 50 + 0.1f;
  const std::vector<int32_t> at = K::step(rows);
  for (IndexerCacheDtype it : {IndexerCacheDtype::f32, IndexerCacheDtype::bf16, IndexerCacheDtype::fp4}) {
    auto topk = [&](Backend& b) {
      const PagedRows p = paged.rows(b, b.encode_indexer(b.upload(keys, {K::kPoolRows, K::kDim}), it));
      std::vector<int32_t> picks = b.download_i32(b.indexer_topk(b.indexer_query(b.upload(q, {n, K::kHeads * K::kDim}), it, K::kDim),
                                                                b.upload(w, {n, K::kHeads}), p, it, K::step_rows(b, at),
                                                                K::kHeads, K::kTopk, K::kRatio, 0.125));
      for (int64_t r = 0; r < n; ++r) std::sort(picks.begin() + r * K::kTopk, picks.begin() + (r + 1) * K::kTopk);
      return picks;
    };
    const std::vector<int32_t> want = topk(*be->cpu), got = topk(*be->gpu), exact = topk(*be->gpu_f32);
    for (int64_t r = 0; r < n; ++r) {
      const std::string where = "format " + std::to_string(int(it)) + " row " + std::to_string(r);
      auto row = [&](const std::vector<int32_t>& v) {
        return std::vector<int32_t>(v.begin() + r * K::kTopk, v.begin() + (r + 1) * K::kTopk);
      };
      EXPECT_EQ(row(got), row(want)) << where;
      EXPECT_EQ(row(got), row(exact)) << where;
    }
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
      // with rope first (3 rows of 3 heads): the fused op as rope then indexer_query, bit for bit,
      // and q left as it was
      std::vector<float> inv_freq(size_t(rope / 2));
      for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * float(i) / float(rope));
      auto rope_query_of = [&](Backend& b, bool fused, const std::vector<float>& values,
                               const std::vector<int32_t>& positions) {
        const int64_t rows = int64_t(positions.size());
        Tensor q = b.upload(values, {rows, int64_t(values.size()) / rows});
        const Tensor pos = b.upload_i32(positions, {rows}), freq = b.upload(inv_freq, {rope / 2});
        if (fused) {
          const std::vector<float> out = b.download(b.rope_indexer_query(q, pos, freq, t, d));
          EXPECT_EQ(b.download(q), values) << "rope_indexer_query changed its input";
          return out;
        }
        b.rope(q, pos, freq, d, false);
        return b.download(b.indexer_query(q, t, d));
      };
      auto rope_query = [&](Backend& b, bool fused) { return rope_query_of(b, fused, x, {0, 7, 4095}); };
      const std::vector<float> fused = rope_query(*be->gpu, true);
      EXPECT_EQ(fused, rope_query(*be->gpu, false)) << "rope_indexer_query d=" << d;
      // near the CPU: a rounding apart in the rotation may move a value across a code boundary
      EXPECT_LT(relative_difference(fused, rope_query(*be->cpu, true)), 1e-2) << "rope_indexer_query against the cpu";
      // a long prefill's rows (256 of 64 heads: the CUDA backend's warp-per-head kernel), bit for bit too
      std::vector<float> many = random_values(size_t(256 * 64 * d), rng);
      for (size_t i = 0; i < many.size(); ++i) many[i] *= std::ldexp(1.0f, int(i % 23) - 11);
      std::vector<int32_t> many_positions(256);
      for (size_t r = 0; r < many_positions.size(); ++r) many_positions[r] = int32_t(37 * r);
      EXPECT_EQ(rope_query_of(*be->gpu, true, many, many_positions), rope_query_of(*be->gpu, false, many, many_positions))
          << "rope_indexer_query of 256 rows, d=" << d;
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
