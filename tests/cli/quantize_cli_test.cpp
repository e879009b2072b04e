// tetra quantize end to end: bf16 in, NVFP4 (ModelOpt) or FP8 + MXFP4 (official) out, loadable
// by tetra with the intended formats, values within the formats' error; failures leave nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "model/weights.h"
#include "support/tiny_checkpoint.h"

namespace tetra {
namespace {
namespace fs = std::filesystem;
using testing::run_command;

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
