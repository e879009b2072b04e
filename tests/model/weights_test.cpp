// Every name family and weight format loads, formats are detected per tensor, and dequantized
// values equal an independent computation from the raw bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "model/weights.h"
#include "support/tiny_checkpoint.h"

namespace tetra {
namespace {
namespace fs = std::filesystem;
using testing::TinyCheckpointOptions;
using testing::TinyQuant;

// Independent decoders, written from the format definitions in SPEC.md.
double e4m3_value(uint8_t b) {
  const int e = (b >> 3) & 0xF, m = b & 7;
  const double v = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return (b & 0x80) ? -v : v;
}
double e2m1_value(uint8_t code) {
  static constexpr double kMagnitude[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (code & 8 ? -1 : 1) * kMagnitude[code & 7];
}
double e8m0_value(uint8_t b) { return std::ldexp(1.0, int(b) - 127); }
uint8_t nibble(const TensorView& w, int64_t i) {
  const uint8_t byte = w.as<uint8_t>()[i / 2];
  return i % 2 ? byte >> 4 : byte & 0xF;
}
float f32_at(const TensorView& t, int64_t i) {
  float f;
  std::memcpy(&f, t.data + 4 * i, 4);
  return f;
}
double bf16_value(const TensorView& t, int64_t i) {
  uint16_t h;
  std::memcpy(&h, t.data + 2 * i, 2);
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Expected value of element (o, i) of a linear layer, from its raw tensors.
float expected_value(const LinearWeight& w, int64_t o, int64_t i) {
  const int64_t k = o * w.in + i;
  switch (w.format) {
    case WeightFormat::dense: return float(bf16_value(w.weight, k));
    case WeightFormat::fp8_block: {
      const int64_t cols = (w.in + 127) / 128;
      return float(e4m3_value(w.weight.as<uint8_t>()[k]) * e8m0_value(w.scale.as<uint8_t>()[(o / 128) * cols + i / 128]));
    }
    case WeightFormat::fp8_tensor: return float(e4m3_value(w.weight.as<uint8_t>()[k]) * f32_at(w.scale, 0));
    case WeightFormat::mxfp4:
      return float(e2m1_value(nibble(w.weight, k)) * e8m0_value(w.scale.as<uint8_t>()[o * (w.in / 32) + i / 32]));
    case WeightFormat::nvfp4:
      return float(e2m1_value(nibble(w.weight, k)) * e4m3_value(w.scale.as<uint8_t>()[o * (w.in / 16) + i / 16]) *
                   double(w.global_scale));
  }
  return NAN;
}

struct Variant {
  const char* name;
  TinyCheckpointOptions options;
};

void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

class WeightsTest : public ::testing::TestWithParam<Variant> {};

TEST_P(WeightsTest, LoadsDetectsAndDequantizesExactly) {
  const Variant& v = GetParam();
  const fs::path dir = fs::temp_directory_path() / ("tetra_weights_" + std::to_string(::getpid()) + "_" + v.name);
  fs::remove_all(dir);
  testing::write_tiny_checkpoint(dir.string(), v.options);
  const ModelConfig config = load_model_config(dir.string());
  const TensorStore store(dir.string());
  const ModelWeights weights(config, store);
  EXPECT_EQ(weights.has_mtp(), v.options.with_mtp);

  std::map<WeightFormat, int> formats;
  for (const LinearWeight* w : weights.linears()) {
    formats[w->format]++;
    const std::vector<float> values = dequantize(*w);
    ASSERT_EQ(int64_t(values.size()), w->out * w->in) << w->role;
    for (int64_t o = 0; o < w->out; ++o)
      for (int64_t i = 0; i < w->in; ++i)
        ASSERT_EQ(values[size_t(o * w->in + i)], expected_value(*w, o, i)) << w->role << " [" << o << ", " << i << "]";
  }
  const LinearWeight& expert = weights.linear("layers.1.ffn.experts.3.w2");
  const LinearWeight& wq_a = weights.linear("layers.1.attn.wq_a");
  const LinearWeight& wq_b = weights.linear("layers.1.attn.wq_b");
  switch (v.options.quant) {
    case TinyQuant::bf16:
      EXPECT_EQ(formats.size(), 1u);
      EXPECT_EQ(expert.format, WeightFormat::dense);
      break;
    case TinyQuant::fp8_mxfp4:
      EXPECT_EQ(expert.format, WeightFormat::mxfp4);
      EXPECT_EQ(wq_a.format, WeightFormat::fp8_block);
      EXPECT_EQ(weights.linear("layers.1.ffn.gate").format, WeightFormat::dense);
      break;
    case TinyQuant::nvfp4:
      EXPECT_EQ(expert.format, WeightFormat::nvfp4);
      EXPECT_TRUE(expert.input_scale.has_value());
      EXPECT_EQ(wq_a.format, WeightFormat::nvfp4);
      EXPECT_EQ(wq_b.format, WeightFormat::fp8_tensor);
      EXPECT_EQ(weights.linear("layers.1.attn.wo_a").format, WeightFormat::dense);
      break;
  }
  // Parameters keep their dtype; the hash table is an integer table.
  EXPECT_EQ(weights.param("layers.0.ffn.gate.tid2eid").view.dtype, DType::i64);
  EXPECT_EQ(weights.param("layers.2.hc_attn_fn").view.shape, (Shape{24, 256}));
  EXPECT_FALSE(weights.has_param("layers.0.ffn.gate.bias"));
  EXPECT_TRUE(weights.has_param("layers.1.ffn.gate.bias"));
  fs::remove_all(dir);
}

TinyCheckpointOptions opts(NameFamily f, TinyQuant q, int shards = 1, bool mtp = false, bool fused = false,
                           DType fp4 = DType::i8) {
  TinyCheckpointOptions o;
  o.family = f;
  o.quant = q;
  o.shards = shards;
  o.with_mtp = mtp;
  o.fused_experts = fused;
  o.fp4_storage = fp4;
  return o;
}

INSTANTIATE_TEST_SUITE_P(
    AllFamiliesAndFormats, WeightsTest,
    ::testing::Values(Variant{"official_bf16", opts(NameFamily::official, TinyQuant::bf16)},
                      Variant{"official_fp8_mxfp4_sharded_mtp", opts(NameFamily::official, TinyQuant::fp8_mxfp4, 3, true)},
                      Variant{"official_fp8_mxfp4_f4", opts(NameFamily::official, TinyQuant::fp8_mxfp4, 1, false, false, DType::f4_e2m1)},
                      Variant{"official_fp8_mxfp4_u8", opts(NameFamily::official, TinyQuant::fp8_mxfp4, 1, false, false, DType::u8)},
                      Variant{"official_nvfp4", opts(NameFamily::official, TinyQuant::nvfp4)},
                      Variant{"hf_save_bf16", opts(NameFamily::hf_save, TinyQuant::bf16, 2)},
                      Variant{"hf_save_fp8_mxfp4", opts(NameFamily::hf_save, TinyQuant::fp8_mxfp4)},
                      Variant{"hf_module_bf16_fused", opts(NameFamily::hf_module, TinyQuant::bf16, 1, false, true)},
                      Variant{"hf_module_nvfp4_sharded", opts(NameFamily::hf_module, TinyQuant::nvfp4, 4)},
                      Variant{"hf_module_fp8_mxfp4_mtp", opts(NameFamily::hf_module, TinyQuant::fp8_mxfp4, 1, true)}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Weights, FusedExpertsAreSlicedGateFirst) {
  const fs::path dir = fs::temp_directory_path() / ("tetra_fused_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  testing::write_tiny_checkpoint(dir.string(), opts(NameFamily::hf_module, TinyQuant::bf16, 1, false, true));
  const ModelConfig config = load_model_config(dir.string());
  const TensorStore store(dir.string());
  const ModelWeights weights(config, store);
  const auto* fused = store.find("model.layers.2.mlp.experts.gate_up_proj");
  ASSERT_TRUE(fused);
  const TensorView gate_up = store.view(*fused);
  const int64_t I = config.moe_inter_dim, H = config.dim;
  const LinearWeight& w1 = weights.linear("layers.2.ffn.experts.3.w1");
  const LinearWeight& w3 = weights.linear("layers.2.ffn.experts.3.w3");
  EXPECT_EQ(w1.weight.data, gate_up.data + (3 * 2 * I * H) * 2);
  EXPECT_EQ(w3.weight.data, gate_up.data + (3 * 2 * I * H + I * H) * 2);
  EXPECT_EQ(w1.out, I);
  EXPECT_EQ(weights.linear("layers.2.ffn.experts.3.w2").out, H);
  fs::remove_all(dir);
}

TEST(Weights, TransformersSavePretrainedCheckpoint) {
  const std::string dir = TETRA_SOURCE_DIR "/tests/data/hf_save_pretrained";
  const ModelConfig config = load_model_config(dir);
  const TensorStore store(dir);
  const ModelWeights weights(config, store);
  EXPECT_FALSE(weights.has_mtp());
  EXPECT_EQ(weights.linear("layers.1.attn.wkv").sources[0], "model.layers.1.attn.wkv.weight");
  EXPECT_EQ(weights.param("layers.1.attn.kv_norm.weight").source, "model.layers.1.attn.norm.weight");
  EXPECT_EQ(weights.linear("layers.3.attn.indexer.wq_b").out, 4 * 32);
  EXPECT_EQ(weights.param("layers.2.attn.compressor.ape").view.shape, (Shape{8, 64}));
  // tid2eid was filled with valid expert ids by the script that wrote the fixture.
  const std::vector<float> table = to_f32(weights.param("layers.0.ffn.gate.tid2eid").view);
  float max_id = 0;
  for (float x : table) max_id = std::max(max_id, x);
  EXPECT_GT(max_id, 0);
  EXPECT_LT(max_id, float(config.n_routed_experts));
}

// A hash router's table naming an expert the layer does not have fails at load, by tensor and
// entry (it loaded: the CPU failed at the first step that routed the token, the CUDA router trapped).
TEST(Weights, Tid2eidOutsideTheExpertsFailsAtLoad) {
  const fs::path src = TETRA_SOURCE_DIR "/tests/data/hf_save_pretrained";
  const fs::path dir = fs::temp_directory_path() / ("tetra_tid2eid_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(src / "config.json", dir / "config.json");
  const ModelConfig config = load_model_config(dir.string());
  for (const int64_t bad : {config.n_routed_experts, int64_t(-1), (int64_t(1) << 32) + 1}) {
    fs::copy_file(src / "model.safetensors", dir / "model.safetensors", fs::copy_options::overwrite_existing);
    uint64_t offset = 0;  // of entry [5, 1]: after the 8-byte length and the header
    {
      const SafetensorsFile file((dir / "model.safetensors").string());
      for (const auto& e : file.entries())
        if (e.name == "model.layers.0.ffn.gate.tid2eid") {
          ASSERT_EQ(e.dtype, DType::i64);
          offset = e.begin + uint64_t(8 * (5 * e.shape[1] + 1));
        }
    }
    std::fstream f(dir / "model.safetensors", std::ios::binary | std::ios::in | std::ios::out);
    uint64_t header_len = 0;  // little-endian, as the test machines are
    f.read(reinterpret_cast<char*>(&header_len), 8);
    f.seekp(std::streamoff(8 + header_len + offset));
    f.write(reinterpret_cast<const char*>(&bad), 8);
    f.close();
    const TensorStore store(dir.string());
    try {
      ModelWeights weights(config, store);
      ADD_FAILURE() << "tid2eid entry " << bad << " loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::model);
      const std::string msg = e.what();
      EXPECT_NE(msg.find("'model.layers.0.ffn.gate.tid2eid' in "), std::string::npos) << msg;
      EXPECT_NE(msg.find("entry [5, 1] = " + std::to_string(bad) + " is not an expert id in [0, 8)"), std::string::npos)
          << msg;
    }
  }
  fs::remove_all(dir);
}

// Weights handed over already resolved (synthetic models) are checked role by role.
TEST(Weights, ResolvedRolesAreCheckedAgainstTheConfig) {
  const std::string dir = TETRA_SOURCE_DIR "/tests/data/hf_save_pretrained";
  const ModelConfig config = load_model_config(dir);
  const TensorStore store(dir);
  const ModelWeights from_files(config, store);
  std::vector<LinearWeight> linears;
  std::vector<ParamWeight> params;
  for (const auto* l : from_files.linears()) linears.push_back(*l);
  for (const auto* p : from_files.params()) params.push_back(*p);
  const ModelWeights same(config, linears, params, false);
  EXPECT_EQ(same.total_bytes(), from_files.total_bytes());
  EXPECT_EQ(same.linears().size(), from_files.linears().size());
  EXPECT_EQ(same.linear("layers.1.attn.wkv").weight.data, from_files.linear("layers.1.attn.wkv").weight.data);

  auto problems = [&](std::vector<LinearWeight> l, std::vector<ParamWeight> p) -> std::string {
    try {
      const ModelWeights w(config, std::move(l), std::move(p), false);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::model);
      return e.what();
    }
    return "";
  };
  auto without = [](std::vector<LinearWeight> v, const std::string& role) {
    std::erase_if(v, [&](const LinearWeight& w) { return w.role == role; });
    return v;
  };
  EXPECT_NE(problems(without(linears, "layers.2.attn.wq_b"), params).find("missing linear layers.2.attn.wq_b"),
            std::string::npos);
  auto reshaped = linears;
  for (auto& l : reshaped)
    if (l.role == "head") l.out -= 1;
  EXPECT_NE(problems(reshaped, params).find("linear head is"), std::string::npos);
  auto doubled = params;
  doubled.push_back(params.front());
  EXPECT_NE(problems(linears, doubled).find("given twice"), std::string::npos);
  auto extra = linears;
  extra.push_back(linears.front());
  extra.back().role = "layers.9.attn.wq_a";
  EXPECT_NE(problems(extra, params).find("linear layers.9.attn.wq_a is not a role of this config"), std::string::npos);
}

}  // namespace
}  // namespace tetra
