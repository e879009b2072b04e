// ModelConfig from the three config.json shapes, and errors that name the bad field.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/config.h"
#include "model/config_writer.h"

namespace tetra {
namespace {
using nlohmann::json;

std::string read_file(const std::string& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The published V4-Flash config (repo-root legacy form), from ../shared/reference.
json flash_legacy() { return json::parse(read_file(TETRA_SOURCE_DIR "/tests/data/v4_flash/config.json")); }

TEST(Config, LegacyFlash) {
  const ModelConfig c = parse_model_config(flash_legacy().dump(), "config.json");
  EXPECT_EQ(c.form, ConfigForm::legacy);
  EXPECT_EQ(c.n_layers, 43);
  EXPECT_EQ(c.n_mtp_layers, 1);
  EXPECT_EQ(c.compress_ratios.size(), 43u);
  EXPECT_EQ(c.attention_kind(0), AttentionKind::sliding);
  EXPECT_EQ(c.attention_kind(2), AttentionKind::csa);
  EXPECT_EQ(c.attention_kind(3), AttentionKind::hca);
  EXPECT_EQ(c.attention_kind(42), AttentionKind::csa);
  EXPECT_EQ(c.n_hash_layers(), 3);
  EXPECT_TRUE(c.hash_routed[2] && !c.hash_routed[3]);
  EXPECT_EQ(c.rope_dim, 64);
  EXPECT_TRUE(c.yarn.enabled);
  EXPECT_EQ(c.yarn.original_max_position, 65536);
  EXPECT_EQ(c.quant.method, "fp8");
  EXPECT_EQ(c.route_scale, 1.5);
}

TEST(Config, TransformersSavePretrained) {
  const ModelConfig c = parse_model_config(read_file(TETRA_SOURCE_DIR "/tests/data/hf_save_pretrained/config.json"), "x");
  EXPECT_EQ(c.form, ConfigForm::transformers);
  EXPECT_EQ(c.compress_ratios, (std::vector<int64_t>{0, 4, 8, 4}));
  EXPECT_EQ(c.hash_routed, (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(c.rope_dim, 16);
  EXPECT_TRUE(c.yarn.enabled);
  EXPECT_EQ(c.yarn.factor, 16);
  EXPECT_EQ(c.compress_rope_theta, 160000);
}

TEST(Config, ModelOptFlatRopeAndQuantization) {
  json j = json::parse(read_file(TETRA_SOURCE_DIR "/tests/data/hf_save_pretrained/config.json"));
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 8}, {"original_max_position_embeddings", 1024}};
  j["quantization_config"] = {{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}};
  const ModelConfig c = parse_model_config(j.dump(), "x");
  EXPECT_EQ(c.yarn.factor, 8);
  EXPECT_EQ(c.quant.method, "modelopt");
  EXPECT_EQ(c.quant.quant_algo, "NVFP4");
}

// What tetra quantize writes reads back as the same config, in both shapes.
TEST(Config, WrittenConfigRoundTrips) {
  const ModelConfig flash = parse_model_config(flash_legacy().dump(), "flash");
  const ModelConfig hf = parse_model_config(read_file(TETRA_SOURCE_DIR "/tests/data/hf_save_pretrained/config.json"), "hf");
  json plain_rope = flash_legacy();  // no YaRN: written without it, not as a yarn block of defaults
  plain_rope.erase("rope_scaling");
  const ModelConfig no_yarn = parse_model_config(plain_rope.dump(), "no yarn");
  ASSERT_FALSE(no_yarn.yarn.enabled);
  for (const ModelConfig& c : {flash, hf, no_yarn}) {
    for (ConfigForm form : {ConfigForm::legacy, ConfigForm::transformers}) {
      const ModelConfig back = parse_model_config(model_config_json(c, form), "written");
      EXPECT_EQ(back.form, form);
      EXPECT_EQ(back.summary().substr(back.summary().find('\n')), c.summary().substr(c.summary().find('\n')));
      EXPECT_EQ(back.compress_ratios, c.compress_ratios);
      EXPECT_EQ(back.hash_routed, c.hash_routed);
      EXPECT_EQ(back.n_mtp_layers, c.n_mtp_layers);
      EXPECT_EQ(back.rope_dim, c.rope_dim);
      EXPECT_EQ(back.yarn.enabled, c.yarn.enabled);
      EXPECT_EQ(back.yarn.original_max_position, c.yarn.original_max_position);
      EXPECT_EQ(back.quant.method, c.quant.method);
      EXPECT_EQ(back.swiglu_limit, c.swiglu_limit);
      EXPECT_EQ(back.norm_eps, c.norm_eps);
    }
  }
}

json hf_config() { return json::parse(read_file(TETRA_SOURCE_DIR "/tests/data/hf_save_pretrained/config.json")); }

struct Case {
  std::function<void(json&)> mutate;
  std::string field;  // in the error text
};

// Each mutation of `base` is a model error that names dir/config.json and says `field`.
void expect_refused(const json& base, const std::vector<Case>& cases) {
  for (const auto& c : cases) {
    json j = base;
    c.mutate(j);
    try {
      parse_model_config(j.dump(), "dir/config.json");
      ADD_FAILURE() << "accepted: " << c.field;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::model);
      EXPECT_NE(std::string(e.what()).find(c.field), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("dir/config.json"), std::string::npos) << e.what();
    }
  }
}

std::string error_of(const std::string& text) {
  try {
    parse_model_config(text, "dir/config.json");
    return "accepted";
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(Config, BadFieldsAreNamed) {
  expect_refused(flash_legacy(), {
      {[](json& j) { j.erase("hidden_size"); }, "'hidden_size' is missing"},
      {[](json& j) { j["num_attention_heads"] = "64"; }, "'num_attention_heads' must be an integer"},
      {[](json& j) { j["o_groups"] = 7; }, "'o_groups' must divide"},
      {[](json& j) { j["compress_ratios"].push_back(4); }, "'compress_ratios' has 45 entries"},
      {[](json& j) { j["compress_ratios"][3] = -1; },
       "'compress_ratios' has an entry -1; each must be an integer in [0, 65536]"},
      {[](json& j) { j["qk_rope_head_dim"] = 63; }, "'qk_rope_head_dim'"},
      {[](json& j) { j["scoring_func"] = "relu"; }, "'scoring_func'"},
      {[](json& j) { j["num_experts_per_tok"] = 300; }, "'num_experts_per_tok' exceeds"},
      {[](json& j) { j["rope_scaling"]["type"] = "linear"; }, "'rope_scaling.rope_type'"},
      {[](json& j) { j["rope_scaling"].erase("factor"); }, "'rope_scaling.factor' is missing"},
      {[](json& j) { j["quantization_config"]["weight_block_size"] = {64, 64}; },
       "'quantization_config.weight_block_size'"},
      {[](json& j) { j["num_key_value_heads"] = 8; }, "'num_key_value_heads'"},
      {[](json& j) { j["num_hash_layers"] = 99; }, "'num_hash_layers'"},
      {[](json& j) { j["model_type"] = "llama"; }, "'model_type'"},
      {[](json& j) { j.erase("compress_ratios"); }, "'layer_types'"},
  });
  EXPECT_THROW(parse_model_config("{", "x"), Error);
}

// Sizes and counts past the limits (far above V4-Pro) are refused before anything multiplies
// or allocates by them; floats outside int64 are refused, not cast (1e30 was undefined
// behaviour), and 2^64 - 1 is not read as -1.
constexpr int64_t kBig = int64_t(1) << 62;

TEST(Config, SizesAndCountsAreBounded) {
  expect_refused(flash_legacy(), {
      {[](json& j) { j["hidden_size"] = 1e30; }, "'hidden_size' must be an integer in [1, 1048576], got 1e+30"},
      {[](json& j) { j["hidden_size"] = kBig; },
       "'hidden_size' must be an integer in [1, 1048576], got 4611686018427387904"},
      {[](json& j) { j["hidden_size"] = 4096.5; }, "'hidden_size' must be an integer in [1, 1048576], got 4096.5"},
      {[](json& j) { j["vocab_size"] = int64_t(1) << 31; }, "'vocab_size' must be an integer in [1, 2147483647]"},
      {[](json& j) { j["num_hidden_layers"] = 5000; }, "'num_hidden_layers' must be an integer in [1, 4096]"},
      {[](json& j) { j["num_attention_heads"] = kBig; }, "'num_attention_heads' must be an integer in [1, 65536]"},
      {[](json& j) { j["head_dim"] = kBig; }, "'head_dim' must be an integer in [1, 1048576]"},
      {[](json& j) { j["q_lora_rank"] = kBig; }, "'q_lora_rank' must be an integer in [1, 1048576]"},
      {[](json& j) { j["o_lora_rank"] = kBig; }, "'o_lora_rank' must be an integer in [1, 1048576]"},
      {[](json& j) { j["n_routed_experts"] = kBig; }, "'n_routed_experts' must be an integer in [1, 65536]"},
      {[](json& j) { j["n_shared_experts"] = -1; }, "'n_shared_experts' must be an integer in [0, 65536], got -1"},
      {[](json& j) { j["n_shared_experts"] = ~uint64_t(0); },
       "'n_shared_experts' must be an integer in [0, 65536], got 18446744073709551615"},
      {[](json& j) { j["moe_intermediate_size"] = kBig; }, "'moe_intermediate_size' must be an integer in [1, 1048576]"},
      {[](json& j) { j["index_n_heads"] = kBig; }, "'index_n_heads' must be an integer in [1, 65536]"},
      {[](json& j) { j["index_head_dim"] = kBig; }, "'index_head_dim' must be an integer in [1, 1048576]"},
      {[](json& j) { j["index_topk"] = kBig; }, "'index_topk' must be an integer in [1, 65536]"},
      {[](json& j) { j["sliding_window"] = 0; }, "'sliding_window' must be an integer in [1, 65536], got 0"},
      {[](json& j) { j["hc_mult"] = 17; }, "'hc_mult' must be an integer in [1, 16]"},
      {[](json& j) { j["hc_sinkhorn_iters"] = int64_t(1) << 31; },
       "'hc_sinkhorn_iters' must be an integer in [1, 1000]"},
      {[](json& j) { j["max_position_embeddings"] = -1; },
       "'max_position_embeddings' must be an integer in [0, 2147483647]"},
      {[](json& j) { j["num_nextn_predict_layers"] = kBig; },
       "'num_nextn_predict_layers' must be an integer in [0, 4096]"},
      {[](json& j) { j["num_hash_layers"] = -1; }, "'num_hash_layers' must be an integer in [0, 43]"},
      {[](json& j) { j["bos_token_id"] = 129280; }, "'bos_token_id' must be an integer in [-1, 129279]"},
      {[](json& j) { j["eos_token_id"] = ~uint64_t(0); }, "'eos_token_id' must be an integer in [-1, 129279]"},
      {[](json& j) { j["compress_ratios"][3] = 1e30; }, "'compress_ratios' has an entry 1e+30; each must be"},
      {[](json& j) { j["compress_ratios"][3] = 65537; }, "'compress_ratios' has an entry 65537; each must be"},
      {[](json& j) { j["n_routed_experts"] = 65536; },
       "'n_routed_experts' times the layers (num_hidden_layers + num_nextn_predict_layers) must be at most 1048576, got 2883584"},
  });
}

// Reals the model uses must be finite in fp32 and in their domain: an epsilon of 0 can divide
// by zero, a rope base of 1 or less divides YaRN by ln(theta) <= 0.
TEST(Config, RealsAreInTheirDomain) {
  expect_refused(flash_legacy(), {
      {[](json& j) { j["rms_norm_eps"] = 0; }, "'rms_norm_eps' must be a number in [1.17549e-38, 1], got 0"},
      {[](json& j) { j["hc_eps"] = 1e-300; }, "'hc_eps' must be a number in [1.17549e-38, 1], got 1e-300"},
      {[](json& j) { j["hc_eps"] = "1e-6"; }, "'hc_eps' must be a number, got \"1e-6\""},
      {[](json& j) { j["rope_theta"] = 1; }, "'rope_theta' must be a number in (1, 3.40282e+38], got 1"},
      {[](json& j) { j["compress_rope_theta"] = 1e39; }, "'compress_rope_theta' must be a number in (1, 3.40282e+38]"},
      {[](json& j) { j["routed_scaling_factor"] = 0; }, "'routed_scaling_factor' must be a number in (0, 3.40282e+38]"},
      {[](json& j) { j["swiglu_limit"] = -1; }, "'swiglu_limit' must be a number in [0, 3.40282e+38], got -1"},
      {[](json& j) { j["rope_scaling"]["factor"] = 0.5; }, "'rope_scaling.factor' must be a number in [1, 3.40282e+38]"},
      {[](json& j) { j["rope_scaling"]["beta_fast"] = 0; },
       "'rope_scaling.beta_fast' must be a number in (0, 3.40282e+38]"},
      {[](json& j) { j["rope_scaling"]["beta_slow"] = -1; },
       "'rope_scaling.beta_slow' must be a number in (0, 3.40282e+38]"},
      {[](json& j) { j["rope_scaling"]["original_max_position_embeddings"] = 0; },
       "'rope_scaling.original_max_position_embeddings' must be a number in (0, 3.40282e+38]"},
  });
}

// The transformers form's ratios: CSA is ratio 4 (a rate of 8 ran its layers as HCA), HCA any
// other (a rate of 4 ran them as CSA).
TEST(Config, TransformersRatesAndRopeAreChecked) {
  expect_refused(hf_config(), {
      {[](json& j) { j["compress_rates"]["compressed_sparse_attention"] = 8; },
       "'compress_rates.compressed_sparse_attention' must be 4 (any other ratio is HCA), got 8"},
      {[](json& j) { j["compress_rates"]["heavily_compressed_attention"] = 4; },
       "'compress_rates.heavily_compressed_attention' must not be 4 (ratio 4 is CSA)"},
      {[](json& j) { j["compress_rates"]["heavily_compressed_attention"] = 0; },
       "'compress_rates.heavily_compressed_attention' must be an integer in [1, 65536], got 0"},
      {[](json& j) { j["partial_rotary_factor"] = 1e300; },
       "'partial_rotary_factor' must be a number in (0, 1], got 1e+300"},
      {[](json& j) { j["rope_parameters"]["main"]["rope_theta"] = 0.5; },
       "'rope_parameters.main.rope_theta' must be a number in (1, "},
      {[](json& j) { j["rope_parameters"]["compress"]["factor"] = 0; },
       "'rope_parameters.compress.factor' must be a number in [1, "},
      {[](json& j) { j.erase("mlp_layer_types"); j["num_hash_layers"] = 99; },
       "'num_hash_layers' must be an integer in [0, 4], got 99"},
  });
}

TEST(Config, HostileJsonIsAModelError) {
  json j = flash_legacy();
  j["rope_theta"] = "@";
  std::string text = j.dump();
  const size_t at = text.find("\"@\"");
  EXPECT_EQ(error_of(std::string(text).replace(at, 3, "1e400")),
            "dir/config.json: not valid JSON: [json.exception.out_of_range.406] number overflow parsing '1e400'");
  // Error messages dump a field's value, recursively: a million nested brackets overflowed the stack.
  EXPECT_EQ(error_of(text.replace(at, 3, std::string(1000000, '[') + std::string(1000000, ']'))),
            "dir/config.json: nests JSON deeper than 64 levels");
}

// hf_quant_config.json beside config.json is read by the same rules.
TEST(Config, HfQuantConfigIsParsedLikeConfig) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("tetra_config_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << flash_legacy().dump();
  std::ofstream(dir / "hf_quant_config.json") << R"({"quantization": {"quant_algo": 1e400}})";
  try {
    load_model_config(dir.string());
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), (dir / "hf_quant_config.json").string() +
                                         ": not valid JSON: [json.exception.out_of_range.406] number overflow parsing '1e400'");
  }
  std::ofstream(dir / "hf_quant_config.json") << "[]";
  try {
    load_model_config(dir.string());
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), (dir / "hf_quant_config.json").string() + ": not a JSON object");
  }
  fs::remove_all(dir);
}

// The published configs, integral floats and the limits themselves still load; any ratio other
// than 0 and 4 is HCA (the compressors take it as a parameter).
TEST(Config, RealGeometriesLoad) {
  const ModelConfig pro = parse_model_config(read_file(TETRA_SOURCE_DIR "/tests/data/v4_pro/config.json"), "pro");
  EXPECT_EQ(pro.dim, 7168);
  EXPECT_EQ(pro.n_routed_experts, 384);
  EXPECT_EQ(pro.n_layers, 61);
  EXPECT_EQ(pro.attention_kind(0), AttentionKind::hca);
  json j = flash_legacy();
  j["hidden_size"] = 4096.0;
  j["hc_sinkhorn_iters"] = 1000;
  j["n_routed_experts"] = 65536 / 4;
  j["num_hidden_layers"] = 63;
  j["compress_ratios"] = std::vector<int64_t>(64, 7);
  const ModelConfig c = parse_model_config(j.dump(), "x");
  EXPECT_EQ(c.dim, 4096);
  EXPECT_EQ(c.attention_kind(0), AttentionKind::hca);
  EXPECT_EQ(c.compress_ratios[0], 7);
}

// A transformers-form config without mlp_layer_types whose num_hidden_layers disagrees with
// layer_types fails on the count, not after a loop to num_hidden_layers (10^12 ran that long;
// it is now past the bound on layers).
TEST(Config, LayerCountIsCheckedBeforeItIsLoopedOver) {
  json j = hf_config();
  j.erase("mlp_layer_types");
  j["num_hidden_layers"] = 4096;
  EXPECT_EQ(error_of(j.dump()), "dir/config.json: field 'layer_types' has 4 entries for 4096 layers");
  j["num_hidden_layers"] = 1000000000000LL;
  EXPECT_EQ(error_of(j.dump()),
            "dir/config.json: field 'num_hidden_layers' must be an integer in [1, 4096], got 1000000000000");
}

}  // namespace
}  // namespace tetra
