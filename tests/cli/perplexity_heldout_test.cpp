// tetra perplexity against transformers on the committed demo model's held-out tokens, and the
// quantized demo checkpoints' distance from it (the bounds).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"

namespace tetra {
namespace {
namespace fs = std::filesystem;
using testing::run_command;

const fs::path kDemo = fs::path(TETRA_SOURCE_DIR) / "models" / "demo";
constexpr int kWindows = 4;  // 4 windows of 512 held-out tokens: 2044 scored tokens

// `tetra perplexity ARGS --json`, stderr (the running perplexity) dropped; fails the test on a
// non-zero exit.
nlohmann::json perplexity_json(const std::string& args) {
  const auto r = run_command("(" + std::string(TETRA_BINARY) + " perplexity " + args + " --json 2>/dev/null)");
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
  return nlohmann::json::parse(r.output, nullptr, false);
}

double heldout_perplexity(const std::string& model, const std::string& caches, int windows) {
  const auto j = perplexity_json("--model " + (kDemo / model).string() + " --tokens-file " +
                                 (kDemo / "heldout_ids.json").string() + " --context 512 --chunks " +
                                 std::to_string(windows) + " " + caches);
  return j.is_discarded() ? NAN : j["perplexity"].get<double>();
}

const std::string kF32Caches = "--kv-cache-dtype f32 --indexer-cache-dtype f32";

struct Reference {
  std::vector<double> window_nll;
  std::vector<std::vector<double>> token_logprobs;
  double perplexity = 0;
};

// transformers' f32 numbers (tools/demo_model/train.py) for the first `windows` windows.
Reference transformers_reference(int windows = kWindows) {
  std::ifstream in(kDemo / "heldout_reference.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["context"], 512);
  Reference ref;
  double nll = 0, scored = 0;
  for (int w = 0; w < windows; ++w) {
    ref.window_nll.push_back(j["windows"][w]["nll_sum"].get<double>());
    ref.token_logprobs.push_back(j["logprobs"][w].get<std::vector<double>>());
    nll += ref.window_nll.back();
    scored += j["windows"][w]["tokens_scored"].get<double>();
  }
  ref.perplexity = std::exp(nll / scored);
  return ref;
}

TEST(PerplexityCli, Bf16WithF32CachesEqualsTransformers) {
  const Reference ref = transformers_reference();
  const auto j = perplexity_json("--model " + (kDemo / "bf16").string() + " --tokens-file " +
                                 (kDemo / "heldout_ids.json").string() + " --context 512 --chunks " +
                                 std::to_string(kWindows) + " --per-token " + kF32Caches);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["tokens_scored"], kWindows * 511);
  EXPECT_NEAR(j["perplexity"].get<double>(), ref.perplexity, 1e-4 * ref.perplexity);
  ASSERT_EQ(j["windows"].size(), size_t(kWindows));
  for (int w = 0; w < kWindows; ++w) {
    EXPECT_NEAR(j["windows"][w]["nll_sum"].get<double>(), ref.window_nll[size_t(w)], 1e-4 * ref.window_nll[size_t(w)])
        << "window " << w;
    // every token (measured: at most 6e-6 apart)
    const auto nlls = j["windows"][w]["token_nlls"].get<std::vector<double>>();
    const auto& logprobs = ref.token_logprobs[size_t(w)];
    ASSERT_EQ(nlls.size(), logprobs.size());
    for (size_t t = 0; t < nlls.size(); ++t) ASSERT_NEAR(nlls[t], -logprobs[t], 1e-4) << "window " << w << " token " << t;
  }
}

// The bounds: 4-bit checkpoints within 15% of bf16, the default FP8 KV / FP4 indexer
// caches within 2% of f32 caches (on 2 windows, 1022 tokens, to keep the six runs short).
TEST(PerplexityCli, QuantizedCheckpointsAndCachesStayClose) {
  constexpr int windows = 2;
  const double bf16 = transformers_reference(windows).perplexity;
  for (const std::string model : {"bf16", "nvfp4", "fp8-mxfp4"}) {
    const double f32_caches = heldout_perplexity(model, kF32Caches, windows);
    const double default_caches = heldout_perplexity(model, "", windows);
    EXPECT_LT(std::fabs(f32_caches / bf16 - 1), 0.15) << model << ": " << f32_caches << " vs bf16 " << bf16;
    EXPECT_LT(std::fabs(default_caches / f32_caches - 1), 0.02) << model << ": " << default_caches << " vs " << f32_caches;
  }
}

}  // namespace
}  // namespace tetra
