// ModelConfig from the three config.json shapes, and errors that name the bad field.
#include <gtest/gtest.h>

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

TEST(Config, BadFieldsAreNamed) {
  struct Case {
    std::function<void(json&)> mutate;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j.erase("hidden_size"); }, "'hidden_size' is missing"},
      {[](json& j) { j["num_attention_heads"] = "64"; }, "'num_attention_heads' must be an integer"},
      {[](json& j) { j["o_groups"] = 7; }, "'o_groups' must divide"},
      {[](json& j) { j["compress_ratios"].push_back(4); }, "'compress_ratios' has 45 entries"},
      {[](json& j) { j["compress_ratios"][3] = -1; }, "'compress_ratios' has a non-integer"},
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
  };
  for (const auto& c : cases) {
    json j = flash_legacy();
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
  EXPECT_THROW(parse_model_config("{", "x"), Error);
}

// A transformers-form config without mlp_layer_types whose num_hidden_layers disagrees with
// layer_types fails on the count at once, however large the number (10^12 ran a loop that long).
TEST(Config, LayerCountIsCheckedBeforeItIsLoopedOver) {
  json j = json::parse(read_file(TETRA_SOURCE_DIR "/tests/data/hf_save_pretrained/config.json"));
  j.erase("mlp_layer_types");
  j["num_hidden_layers"] = 1000000000000LL;
  try {
    parse_model_config(j.dump(), "dir/config.json");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::model);
    EXPECT_NE(std::string(e.what()).find("dir/config.json: field 'layer_types' has 4 entries for 1000000000000 layers"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tetra
