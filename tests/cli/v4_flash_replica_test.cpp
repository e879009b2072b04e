// A header-only replica of the published DeepSeek-V4-Flash checkpoint (46 shards, every tensor of
// ../shared/reference/v4_flash_inventory.md with its name, shape and dtype, data left as sparse
// holes): `tetra info` must report every role and format and the published totals, reading
// headers only, in a few seconds.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "model/config.h"
#include "support/tiny_checkpoint.h"

namespace tetra {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

// The published V4-Flash config.json (repo-root legacy form).
ModelConfig flash_config() {
  json j = {{"hc_eps", 1e-06}, {"hc_mult", 4}, {"hc_sinkhorn_iters", 20}, {"head_dim", 512},
            {"hidden_size", 4096}, {"index_head_dim", 128}, {"index_n_heads", 64}, {"index_topk", 512},
            {"max_position_embeddings", 1048576}, {"model_type", "deepseek_v4"}, {"moe_intermediate_size", 2048},
            {"n_routed_experts", 256}, {"n_shared_experts", 1}, {"num_attention_heads", 64},
            {"num_experts_per_tok", 6}, {"num_hidden_layers", 43}, {"num_hash_layers", 3},
            {"num_nextn_predict_layers", 1}, {"o_groups", 8}, {"o_lora_rank", 1024}, {"q_lora_rank", 1024},
            {"qk_rope_head_dim", 64}, {"routed_scaling_factor", 1.5}, {"sliding_window", 128},
            {"swiglu_limit", 10.0}, {"vocab_size", 129280}, {"compress_rope_theta", 160000}, {"rope_theta", 10000}};
  j["rope_scaling"] = {{"beta_fast", 32}, {"beta_slow", 1}, {"factor", 16},
                       {"original_max_position_embeddings", 65536}, {"type", "yarn"}};
  std::vector<int> ratios = {0, 0};
  for (int i = 0; i < 20; ++i) ratios.insert(ratios.end(), {4, 128});
  ratios.insert(ratios.end(), {4, 0});
  j["compress_ratios"] = ratios;
  return parse_model_config(j.dump(), "flash config");
}

TEST(V4FlashReplica, InfoReportsPublishedTotalsFromHeadersOnly) {
  const fs::path dir = fs::temp_directory_path() / ("tetra_flash_replica_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  testing::TinyCheckpointOptions o;
  o.family = NameFamily::official;
  o.quant = testing::TinyQuant::fp8_mxfp4;
  o.shards = 46;
  o.with_mtp = true;
  o.header_only = true;
  o.config = flash_config();
  testing::write_tiny_checkpoint(dir.string(), o);

  const auto start = std::chrono::steady_clock::now();
  const auto r = testing::run_command(std::string(TETRA_BINARY) + " info --json --model " + dir.string());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.exit_code, 0) << r.output.substr(0, 4000);
  const json j = json::parse(r.output);
  EXPECT_EQ(j["files"], 46);
  EXPECT_EQ(j["tensors"], 69187);
  EXPECT_EQ(j["elements"], 158069433298ull);
  const double gib = double(1ull << 30);
  EXPECT_NEAR(j["tensor_bytes"].get<double>() / gib, 148.65, 0.005);   // published: 148.65 GiB of tensor data
  EXPECT_NEAR(j["file_bytes"].get<double>() / gib, 148.66, 0.011);     // published: 148.66 GiB of files
  EXPECT_EQ(j["weight_bytes"], j["tensor_bytes"]);
  EXPECT_TRUE(j["mtp"].get<bool>());
  EXPECT_EQ(j["formats"]["mxfp4"]["layers"], 44 * 256 * 3);             // 43 layers + MTP, 3 matrices per expert
  EXPECT_EQ(j["formats"]["fp8-block"]["layers"], 44 * 8 + 21 + 2);      // attention 5 + shared 3; indexer wq_b; e/h_proj
  EXPECT_GT(j["formats"]["dense"]["layers"], 0);
  EXPECT_EQ(j["kv"]["csa"]["layers"], 21);
  EXPECT_EQ(j["kv"]["hca"]["layers"], 20);
  EXPECT_EQ(j["kv"]["sliding"]["layers"], 2);
  // fp8 KV entry 584 bytes, fp4 indexer key 68 bytes: CSA (584+68)/4, HCA 584/128 per token.
  EXPECT_DOUBLE_EQ(j["kv"]["csa"]["bytes_per_token"].get<double>(), (584.0 + 68.0) / 4);
  EXPECT_DOUBLE_EQ(j["kv"]["hca"]["bytes_per_token"].get<double>(), 584.0 / 128);
  EXPECT_EQ(j["kv"]["sliding"]["bytes_per_sequence"], 128 * 584);
  EXPECT_LT(seconds, 10.0) << "tetra info took " << seconds << " s";

  const auto human = testing::run_command(std::string(TETRA_BINARY) + " info --model " + dir.string());
  ASSERT_EQ(human.exit_code, 0);
  EXPECT_NE(human.output.find("69187"), std::string::npos);
  EXPECT_NE(human.output.find("148.65 GiB"), std::string::npos);
  EXPECT_NE(human.output.find("mtp.0.ffn.experts.255.w2"), std::string::npos);
  EXPECT_NE(human.output.find("layers.42.attn.indexer.compressor.ape"), std::string::npos);
  std::printf("tetra info on the 46-shard V4-Flash replica: %.2f s\n", seconds);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tetra
