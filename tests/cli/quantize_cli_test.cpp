// tetra quantize end to end: bf16 in, NVFP4 (ModelOpt) or FP8 + MXFP4 (official) out, loadable
// by tetra with the intended formats, values within the formats' error; failures leave nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "io/safetensors.h"
#include "model/weights.h"
#include "support/nearest_code.h"
#include "support/tiny_checkpoint.h"

namespace tetra {
namespace {
namespace fs = std::filesystem;
using testing::brute_force_nearest;
using testing::run_command;

float e2m1_decode(uint8_t c) { return e2m1_to_f32(c); }

double block_amax(const std::vector<float>& w, int64_t in, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  double amax = 0;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, double(std::fabs(w[size_t(r * in + c)])));
  return amax;
}

// What a weight of `format` must dequantize to, from SPEC.md's rules applied to the original
// f32 values `w` ([out, in]) with brute-force rounding.
std::vector<double> expected_dequantized(WeightFormat format, const std::vector<float>& w, int64_t out, int64_t in) {
  std::vector<double> d(w.size());
  if (format == WeightFormat::nvfp4) {
    const float global = float(block_amax(w, in, 0, out, 0, in)) / (6.0f * 448.0f);
    for (int64_t r = 0; r < out; ++r)
      for (int64_t b = 0; b < in; b += 16) {
        const float ideal = float(block_amax(w, in, r, r + 1, b, b + 16)) / (6.0f * global);
        const float scale = e4m3_to_f32(brute_force_nearest(ideal, 0x7F, e4m3_to_f32)) * global;
        for (int64_t c = b; c < b + 16; ++c)
          d[size_t(r * in + c)] = scale > 0 ? e2m1_to_f32(brute_force_nearest(w[size_t(r * in + c)] / scale, 8, e2m1_decode, 8)) * double(scale) : 0;
      }
    return d;
  }
  // FP8 blocks of 128x128 (max code 448) or MXFP4 blocks of 1x32 (max code 6), power-of-two scales
  const bool fp8 = format == WeightFormat::fp8_block;
  const int64_t rows = fp8 ? 128 : 1, cols = fp8 ? 128 : 32;
  const double max_code = fp8 ? 448 : 6;
  for (int64_t r0 = 0; r0 < out; r0 += rows)
    for (int64_t c0 = 0; c0 < in; c0 += cols) {
      const int64_t r1 = std::min(out, r0 + rows), c1 = std::min(in, c0 + cols);
      const double amax = block_amax(w, in, r0, r1, c0, c1);
      const double scale = amax > 0 ? std::ldexp(1.0, int(std::ceil(std::log2(amax / max_code)))) : 0;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) {
          const double x = scale > 0 ? w[size_t(r * in + c)] / scale : 0;
          d[size_t(r * in + c)] = (fp8 ? e4m3_to_f32(brute_force_nearest(x, 0x7F, e4m3_to_f32, 0x80))
                                       : e2m1_to_f32(brute_force_nearest(x, 8, e2m1_decode, 8))) * scale;
        }
    }
  return d;
}

// No final directory and no leftover partial one next to it.
void expect_nothing_written(const fs::path& root, const std::string& name) {
  EXPECT_FALSE(fs::exists(root / name));
  for (const auto& e : fs::directory_iterator(root))
    EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos) << e.path();
}

class QuantizeCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("tetra_quant_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    testing::TinyCheckpointOptions o;
    o.family = NameFamily::hf_save;
    o.with_mtp = true;
    testing::write_tiny_checkpoint((root_ / "bf16").string(), o);
    std::ofstream(root_ / "bf16" / "tokenizer.json") << "{}";
  }
  void TearDown() override { fs::remove_all(root_); }

  testing::CommandResult quantize(const std::string& out, const std::string& format, const std::string& extra = "") {
    return run_command(std::string(TETRA_BINARY) + " quantize --input " + (root_ / "bf16").string() + " --output " +
                       (root_ / out).string() + " --format " + format + " " + extra);
  }

  // Every linear layer of `out` against the bf16 original: relative error within `tolerance`.
  void expect_close(const std::string& out, double tolerance, std::map<WeightFormat, int>& formats) {
    const ModelConfig c0 = load_model_config((root_ / "bf16").string()), c1 = load_model_config((root_ / out).string());
    const TensorStore s0((root_ / "bf16").string()), s1((root_ / out).string());
    const ModelWeights w0(c0, s0), w1(c1, s1);
    EXPECT_TRUE(w1.has_mtp());
    for (const LinearWeight* l : w1.linears()) {
      formats[l->format]++;
      const auto a = dequantize(w0.linear(l->role)), b = dequantize(*l);
      double err = 0, norm = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        err += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        norm += double(a[i]) * a[i];
      }
      EXPECT_LT(std::sqrt(err / norm), tolerance) << l->role << " " << weight_format_name(l->format);
    }
    for (const ParamWeight* p : w1.params())
      EXPECT_EQ(to_f32(p->view), to_f32(w0.param(p->role).view)) << p->role;
  }

  fs::path root_;
};

TEST_F(QuantizeCliTest, NvFp4ModelOptLayout) {
  const auto r = quantize("nvfp4", "nvfp4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::map<WeightFormat, int> formats;
  expect_close("nvfp4", 0.15, formats);
  EXPECT_GT(formats[WeightFormat::nvfp4], 0);
  EXPECT_GT(formats[WeightFormat::dense], 0);  // wo_a, router, compressors, head
  const ModelConfig c = load_model_config((root_ / "nvfp4").string());
  EXPECT_EQ(c.quant.method, "modelopt");
  EXPECT_EQ(c.quant.quant_algo, "NVFP4");
  EXPECT_TRUE(fs::exists(root_ / "nvfp4" / "hf_quant_config.json"));
  EXPECT_TRUE(fs::exists(root_ / "nvfp4" / "tokenizer.json"));
  const TensorStore store((root_ / "nvfp4").string());
  EXPECT_TRUE(store.find("model.layers.1.self_attn.q_a_proj.weight_scale_2"));
  EXPECT_TRUE(store.find("model.layers.1.self_attn.o_a_proj.weight"));
  EXPECT_FALSE(store.find("model.layers.1.self_attn.o_a_proj.weight_scale"));
}

TEST_F(QuantizeCliTest, Fp8Mxfp4OfficialLayoutSharded) {
  const auto r = quantize("fp8", "fp8-mxfp4", "--shard-size-mb 0.25");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("100%"), std::string::npos);  // progress
  std::map<WeightFormat, int> formats;
  expect_close("fp8", 0.15, formats);
  EXPECT_GT(formats[WeightFormat::mxfp4], 0);
  EXPECT_GT(formats[WeightFormat::fp8_block], 0);
  const ModelConfig c = load_model_config((root_ / "fp8").string());
  EXPECT_EQ(c.form, ConfigForm::legacy);
  EXPECT_EQ(c.quant.method, "fp8");
  EXPECT_TRUE(fs::exists(root_ / "fp8" / "model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(root_ / "fp8" / "model-00001-of-00003.safetensors"));
  const TensorStore store((root_ / "fp8").string());
  EXPECT_TRUE(store.find("layers.1.ffn.experts.0.w1.scale"));
}

// Loading the written checkpoint and dequantizing it gives, weight by weight, exactly what the
// format's rules give on the original values (up to the f32 rounding of the scale products).
TEST_F(QuantizeCliTest, DequantizedWeightsFollowTheRulesInBothLayouts) {
  for (const std::string format : {"nvfp4", "fp8-mxfp4"}) {
    ASSERT_EQ(quantize(format, format).exit_code, 0) << format;
    const ModelConfig c0 = load_model_config((root_ / "bf16").string()), c1 = load_model_config((root_ / format).string());
    const TensorStore s0((root_ / "bf16").string()), s1((root_ / format).string());
    const ModelWeights w0(c0, s0), w1(c1, s1);
    int quantized = 0;
    for (const LinearWeight* l : w1.linears()) {
      if (l->format == WeightFormat::dense) continue;
      ++quantized;
      const std::vector<float> original = dequantize(w0.linear(l->role)), got = dequantize(*l);
      const std::vector<double> want = expected_dequantized(l->format, original, l->out, l->in);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 1e-6 * std::fabs(want[i])) << format << " " << l->role << " element " << i;
    }
    EXPECT_GT(quantized, 10) << format;
  }
}

TEST_F(QuantizeCliTest, MissingTensorFailsNamingIt) {
  // The bf16 checkpoint without one expert matrix.
  const TensorStore full((root_ / "bf16").string());
  SafetensorsWriter writer;
  std::string dropped;
  for (const std::string& name : full.names()) {
    if (dropped.empty() && name.find("experts.1.") != std::string::npos) {
      dropped = name;
      continue;
    }
    const TensorView v = full.view(*full.find(name));
    writer.add(name, v.dtype, v.shape, std::span<const std::byte>(v.data, v.nbytes));
  }
  ASSERT_FALSE(dropped.empty());
  fs::create_directories(root_ / "holed");
  writer.write((root_ / "holed" / "model.safetensors").string());
  fs::copy_file(root_ / "bf16" / "config.json", root_ / "holed" / "config.json");
  const auto r = run_command(std::string(TETRA_BINARY) + " quantize --input " + (root_ / "holed").string() +
                             " --output " + (root_ / "out").string() + " --format nvfp4");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("missing"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("experts.1."), std::string::npos) << r.output;
  expect_nothing_written(root_, "out");
}

TEST_F(QuantizeCliTest, IndivisibleDimensionsFailNamingTheTensor) {
  // Expert inputs of 40: not a whole number of NVFP4 (16) or MXFP4 (32) blocks.
  testing::TinyCheckpointOptions o;
  o.family = NameFamily::hf_save;
  o.config = testing::tiny_config();
  o.config->moe_inter_dim = 40;
  testing::write_tiny_checkpoint((root_ / "odd").string(), o);
  for (const std::string format : {"nvfp4", "fp8-mxfp4"}) {
    const auto r = run_command(std::string(TETRA_BINARY) + " quantize --input " + (root_ / "odd").string() +
                               " --output " + (root_ / "out").string() + " --format " + format);
    EXPECT_EQ(r.exit_code, 3) << r.output;
    EXPECT_NE(r.output.find("input dimension 40, not divisible"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("experts"), std::string::npos) << r.output;
    expect_nothing_written(root_, "out");
  }
}

TEST_F(QuantizeCliTest, UnwritableOutputFailsCleanly) {
  std::ofstream(root_ / "a_file") << "x";  // a regular file where the output's parent should be
  const auto r = quantize("a_file/out", "nvfp4");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("a_file/out"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cannot create"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(root_ / "a_file" / "out"));
}

TEST_F(QuantizeCliTest, FailuresLeaveNoCheckpoint) {
  ASSERT_EQ(quantize("fp8", "fp8-mxfp4").exit_code, 0);
  // Quantized input is refused, and nothing is written.
  const auto again = run_command(std::string(TETRA_BINARY) + " quantize --input " + (root_ / "fp8").string() +
                                 " --output " + (root_ / "twice").string() + " --format nvfp4");
  EXPECT_EQ(again.exit_code, 3) << again.output;
  EXPECT_NE(again.output.find("already"), std::string::npos);
  EXPECT_FALSE(fs::exists(root_ / "twice"));
  for (const auto& e : fs::directory_iterator(root_))
    EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos) << e.path();
  // An existing output is never overwritten; a bad format is a usage error.
  EXPECT_EQ(quantize("fp8", "nvfp4").exit_code, 2);
  EXPECT_EQ(quantize("x", "int4").exit_code, 2);
  EXPECT_FALSE(fs::exists(root_ / "x"));
}

}  // namespace
}  // namespace tetra
