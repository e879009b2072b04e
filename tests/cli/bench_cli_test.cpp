// tetra bench --synthetic end to end on the CPU backend with a tiny geometry: the table, the
// JSON (every point, its floor, the ceilings, the headline), and usage errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "model/config_writer.h"
#include "support/tiny_checkpoint.h"

namespace tetra {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

class BenchCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tetra_bench_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "config.json") << model_config_json(testing::tiny_config(), ConfigForm::legacy);
  }
  void TearDown() override { fs::remove_all(dir_); }
  testing::CommandResult bench(const std::string& options) {
    return testing::run_command(std::string(TETRA_BINARY) + " bench --device cpu --synthetic " + dir_.string() + " " + options);
  }
  fs::path dir_;
};

TEST_F(BenchCli, TimesDecodeAndPrefillAgainstTheirFloors) {
  const fs::path out = dir_ / "bench.json";
  const auto r = bench("--batch 1 2 --context 0 21 --prefill 16 --steps 2 --format mxfp4-fp8 --json " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("x floor"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("prefill 16 tokens"), std::string::npos) << r.output;
  std::ifstream in(out);
  const json j = json::parse(in);
  EXPECT_EQ(j["layers"], 4);
  EXPECT_EQ(j["format"], "mxfp4-fp8");
  EXPECT_EQ(j["device"]["kind"], "cpu");
  ASSERT_TRUE(j["device"].contains("kernel_launches"));
  EXPECT_TRUE(j["device"]["kernel_launches"].is_null());  // a GPU's: "plain" or "early (PDL)"
  EXPECT_NE(j["command"].get<std::string>().find("--prefill 16"), std::string::npos);
  EXPECT_GT(j["ceilings"]["copy_bytes_per_s"].get<double>(), 0);
  EXPECT_TRUE(j["ceilings"]["bf16_matrix_flops_per_s"].is_null());  // no GPU: no matrix rate
  // the routers balanced before anything is timed: the busiest expert nearer the mean load
  const json& balance = j["routing_balance"];
  EXPECT_GT(balance["steps"].get<int>(), 0);
  EXPECT_GT(balance["tokens"].get<int>(), 0);
  EXPECT_GE(balance["busiest_expert_over_mean_before"].get<double>(), 1.0);
  EXPECT_GE(balance["busiest_expert_over_mean_after"].get<double>(), 1.0);
  ASSERT_EQ(j["decode"].size(), 4u);
  for (const auto& d : j["decode"]) {
    ASSERT_TRUE(d["error"].is_null()) << d.dump();
    EXPECT_EQ(d["samples"].size(), 2u);
    EXPECT_GT(d["step_seconds"].get<double>(), 0);
    EXPECT_GT(d["floor"]["seconds"].get<double>(), 0);
    EXPECT_NEAR(d["tokens_per_s"].get<double>(), d["batch"].get<double>() / d["step_seconds"].get<double>(), 1e-6);
    // the experts a step's routing touched (tiny: 2 of 4 a token): batch 1 exactly its 2, batch 2
    // from 2 to 4; the floor they give moves with them
    const json& f = d["floor"];
    const double touched = f["measured_experts_per_layer"].get<double>();
    if (d["batch"] == 1) {
      EXPECT_EQ(touched, 2.0) << d.dump();
    }
    EXPECT_GE(touched, 2.0) << d.dump();
    EXPECT_LE(touched, 4.0) << d.dump();
    EXPECT_EQ(f["measured_weight_bytes"].get<double>() < f["weight_bytes"].get<double>(),
              touched < f["expected_experts_per_layer"].get<double>())
        << d.dump();
    EXPECT_NEAR(d["step_over_measured_floor"].get<double>(),
                d["step_seconds"].get<double>() / f["measured_seconds"].get<double>(), 1e-9);
  }
  // the context-0 point reads no KV; 21 tokens of context do
  EXPECT_EQ(j["decode"][0]["context"], 0);
  EXPECT_EQ(j["decode"][0]["floor"]["kv_bytes"].get<double>(), 0.0);
  EXPECT_GT(j["decode"][2]["floor"]["kv_bytes"].get<double>(), 0.0);
  EXPECT_EQ(j["prefill"]["tokens"], 16);
  EXPECT_GT(j["prefill"]["tokens_per_s"].get<double>(), 0);
  EXPECT_GT(j["prefill"]["flops"]["total"].get<double>(), 0);
  EXPECT_TRUE(j["headline"]["decode_b1_step_over_floor"].is_number());
  EXPECT_TRUE(j["headline"]["decode_b32_over_b1"].is_null());  // no batch 32 in this run
  EXPECT_TRUE(j["headline"]["decode_b32_floor_over_b1_floor"].is_null());
  EXPECT_TRUE(j["headline"]["decode_b32_measured_floor_over_b1_floor"].is_null());
  EXPECT_GT(j["kv_capacity"]["bytes_per_sequence"].get<double>(), 0);
  EXPECT_TRUE(j["kv_capacity"]["sequences_one_gpu"].is_null());
}

// --speculative times steps of two tokens a sequence beside each point's steps; without it the
// point has no such keys.
TEST_F(BenchCli, SpeculativeStepsTimedBesideThePoint) {
  const fs::path out = dir_ / "spec.json";
  const auto r = bench("--batch 1 3 --context 0 9 --steps 2 --speculative --json " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("two tokens a sequence, batch 3 context 9"), std::string::npos) << r.output;
  std::ifstream in(out);
  const json j = json::parse(in);
  ASSERT_EQ(j["decode"].size(), 4u);
  for (const auto& d : j["decode"]) {
    ASSERT_TRUE(d["speculative_error"].is_null()) << d.dump();
    EXPECT_EQ(d["speculative_samples"].size(), 2u);
    EXPECT_NEAR(d["speculative_step_over_step"].get<double>(),
                d["speculative_step_seconds"].get<double>() / d["step_seconds"].get<double>(), 1e-9);
  }
  const auto plain = bench("--batch 1 --context 0 --steps 1 --json " + (dir_ / "plain.json").string());
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  std::ifstream plain_in(dir_ / "plain.json");
  EXPECT_FALSE(json::parse(plain_in)["decode"][0].contains("speculative_step_seconds"));
}

// Batch 32 against batch 1: the step-time ratio, and the ratio of the byte floors (32 tokens
// touch more experts than one, so their floor is higher).
TEST_F(BenchCli, HeadlineComparesBatch32WithBatch1) {
  const fs::path out = dir_ / "bench32.json";
  const auto r = bench("--batch 1 32 --context 0 --steps 1 --json " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(out);
  const json h = json::parse(in)["headline"];
  ASSERT_TRUE(h["decode_b32_over_b1"].is_number()) << h.dump();
  EXPECT_GT(h["decode_b32_over_b1"].get<double>(), 0);
  ASSERT_TRUE(h["decode_b32_floor_over_b1_floor"].is_number()) << h.dump();
  EXPECT_GT(h["decode_b32_floor_over_b1_floor"].get<double>(), 1.0);
  ASSERT_TRUE(h["decode_b32_measured_floor_over_b1_floor"].is_number()) << h.dump();
  EXPECT_GE(h["decode_b32_measured_floor_over_b1_floor"].get<double>(), 1.0);
}

// With 64 experts, 4 a token, random weights send most tokens to a few experts (the busiest takes
// several times the mean load); the calibration brings that near the noise of a balanced router's
// (~2× at 8 tokens an expert), and a batch of 16 then touches about what random routing would.
TEST_F(BenchCli, BalancedRoutersSpreadABatchOverTheExperts) {
  ModelConfig c = testing::tiny_config();
  c.n_routed_experts = 64;
  c.n_activated_experts = 4;
  std::ofstream(dir_ / "config.json") << model_config_json(c, ConfigForm::legacy);
  const fs::path out = dir_ / "balance.json";
  const auto r = bench("--batch 16 --context 21 --steps 1 --json " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(out);
  const json j = json::parse(in);
  const json& balance = j["routing_balance"];
  EXPECT_GT(balance["busiest_expert_over_mean_before"].get<double>(), 3.0) << balance.dump();
  EXPECT_LT(balance["busiest_expert_over_mean_after"].get<double>(), 2.5) << balance.dump();
  const json& f = j["decode"][0]["floor"];
  EXPECT_GT(f["measured_experts_per_layer"].get<double>(), 0.8 * f["expected_experts_per_layer"].get<double>()) << f.dump();
}

// A point's logits digest is its step computed bit for bit: the same point gives the same digest
// whatever points run before it (each draws its tokens from a stream of its own), and another point
// (other tokens, another batch) another one.
TEST_F(BenchCli, APointsLogitsDoNotDependOnThePointsBeforeIt) {
  auto digests = [&](const std::string& batches, const std::string& name) {
    const fs::path out = dir_ / name;
    const auto r = bench("--batch " + batches + " --context 21 --prefill 16 --steps 1 --json " + out.string());
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("logits "), std::string::npos) << r.output;
    std::ifstream in(out);
    const json j = json::parse(in);
    std::vector<std::string> d;
    for (const auto& p : j["decode"]) d.push_back(p["logits_digest"].get<std::string>());
    d.push_back(j["prefill"]["logits_digest"].get<std::string>());
    return d;
  };
  const auto both = digests("1 2", "both.json"), alone = digests("2", "alone.json");
  ASSERT_EQ(both.size(), 3u);
  ASSERT_EQ(alone.size(), 2u);
  EXPECT_EQ(both[0].size(), 16u);
  EXPECT_EQ(both[1], alone[0]);  // batch 2, after batch 1 or alone
  EXPECT_EQ(both[2], alone[1]);  // the prefill
  EXPECT_NE(both[0], both[1]);
  EXPECT_NE(both[1], both[2]);
}

// --expert-parallel runs the model over ranks that split the routed experts (CPU ranks here): the
// same logits as one backend, so the same digests, and each decode floor is the bytes of the rank
// holding the most experts (half the tiny model's 4 at 2 ranks), less than one backend's.
TEST_F(BenchCli, ExpertParallelRanksGiveOneBackendsDigests) {
  auto run = [&](int ranks) {
    const fs::path out = dir_ / ("ep" + std::to_string(ranks) + ".json");
    const auto r = bench("--batch 1 2 --context 21 --prefill 16 --steps 1 --expert-parallel " + std::to_string(ranks) +
                         " --json " + out.string());
    EXPECT_EQ(r.exit_code, 0) << r.output;
    if (ranks > 1) EXPECT_NE(r.output.find("expert parallelism: " + std::to_string(ranks) + " ranks"), std::string::npos) << r.output;
    std::ifstream in(out);
    return json::parse(in);
  };
  const json one = run(1), two = run(2), three = run(3);
  EXPECT_EQ(one["expert_parallel"], 1);
  EXPECT_EQ(two["expert_parallel"], 2);
  EXPECT_EQ(one["weights"]["largest_rank_device_bytes"], one["weights"]["device_bytes"]);
  EXPECT_LT(two["weights"]["largest_rank_device_bytes"].get<double>(), two["weights"]["device_bytes"].get<double>());
  EXPECT_LT(three["weights"]["largest_rank_device_bytes"].get<double>(), three["weights"]["device_bytes"].get<double>());
  for (const json* split : {&two, &three}) {
    ASSERT_EQ((*split)["decode"].size(), one["decode"].size());
    for (size_t i = 0; i < one["decode"].size(); ++i) {
      const json &a = one["decode"][i], &b = (*split)["decode"][i];
      ASSERT_TRUE(b["error"].is_null()) << b.dump();
      EXPECT_EQ(b["logits_digest"], a["logits_digest"]) << "batch " << a["batch"];
      EXPECT_LT(b["floor"]["weight_bytes"].get<double>(), a["floor"]["weight_bytes"].get<double>());
      EXPECT_EQ(b["floor"]["kv_bytes"], a["floor"]["kv_bytes"]);  // every rank runs attention
    }
    EXPECT_EQ((*split)["prefill"]["logits_digest"], one["prefill"]["logits_digest"]);
  }
}

TEST_F(BenchCli, OptionErrorsAreUsageErrors) {
  for (const char* bad : {"--format fp8", "--layers 9", "--layers 0", "--batch 0", "--batch x", "--context -3",
                          "--steps 0", "--batch 1 --batch 2", "--frobnicate 1", "--device tpu", "--expert-parallel 0",
                          "--expert-parallel 65", "--expert-parallel 5"}) {
    const auto r = bench(bad);
    EXPECT_EQ(r.exit_code, 2) << bad << "\n" << r.output;
    EXPECT_NE(r.output.find("error"), std::string::npos) << bad;
  }
  const auto missing = testing::run_command(std::string(TETRA_BINARY) + " bench --device cpu");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("--synthetic"), std::string::npos) << missing.output;
  const auto unknown = testing::run_command(std::string(TETRA_BINARY) + " bench --device cpu --synthetic v5");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("v4-flash"), std::string::npos) << unknown.output;
}

}  // namespace
}  // namespace tetra
