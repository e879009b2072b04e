// The CPU reference against transformers' fp32 logits (tests/data/golden), with f32 caches,
// for several prefill/decode splits of a batch of sequences of different lengths.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "model/forward.h"
#include "support/golden_batch.h"

namespace tetra {
namespace {

const std::string kGolden = std::string(TETRA_TEST_DATA) + "/golden/";

struct Result {
  double relative = 0;
  int64_t argmax_mismatches = 0;
};

// Runs the batch with the first `prefill` tokens of each sequence in one step, then one
// token per step, and compares with the golden logits.
Result run_split(const std::string& name, int64_t prefill, CacheTypes caches) {
  const std::string dir = kGolden + name;
  const ModelConfig config = load_model_config(dir);
  const auto backend = make_backend("cpu");
  const std::vector<float> got = testing::run_golden_batch(*backend, dir, prefill, caches);
  std::ifstream lin(dir + "/logits.f32", std::ios::binary);
  std::vector<float> want(got.size());
  lin.read(reinterpret_cast<char*>(want.data()), std::streamsize(want.size() * sizeof(float)));
  EXPECT_TRUE(lin && lin.peek() == EOF) << name << ": golden logits size differs";
  Result r;
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  r.relative = std::sqrt(num / den);
  const size_t V = size_t(config.vocab_size);
  for (size_t p = 0; p < got.size() / V; ++p) {
    const auto g = std::max_element(got.begin() + long(p * V), got.begin() + long((p + 1) * V));
    const auto w = std::max_element(want.begin() + long(p * V), want.begin() + long((p + 1) * V));
    r.argmax_mismatches += (g - got.begin()) != (w - want.begin());
  }
  return r;
}

constexpr CacheTypes kExact{KvCacheDtype::f32, IndexerCacheDtype::f32};

class GoldenForward : public ::testing::TestWithParam<std::tuple<std::string, int64_t>> {};

TEST_P(GoldenForward, MatchesTransformersFp32) {
  const auto& [name, prefill] = GetParam();
  const Result r = run_split(name, prefill, kExact);
  EXPECT_LE(r.relative, 1e-4) << name << " prefill " << prefill;
  EXPECT_EQ(r.argmax_mismatches, 0) << name << " prefill " << prefill;
}

// 1000: all prefill; 1: decode from the second token; 13 and 30: prefill ending inside a CSA
// (ratio 4) and HCA (ratio 8/16) window, with the batch's shorter sequences finishing early.
INSTANTIATE_TEST_SUITE_P(AllFixtures, GoldenForward,
                         ::testing::Combine(::testing::Values("dense", "sigmoid", "fp8_mxfp4", "nvfp4"),
                                            ::testing::Values(int64_t(1000), int64_t(1), int64_t(13), int64_t(30))),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_prefill" + std::to_string(std::get<1>(info.param));
                         });

// The default (QAT) caches move a random tiny model's logits by far more than the f32 path:
// they must actually be in effect (the size is recorded in docs/numerics.md).
TEST(GoldenForward, DefaultCachesChangeLogits) {
  const Result r = run_split("dense", 1000, CacheTypes{});
  EXPECT_GT(r.relative, 1e-3);
}

// Prefill and decode of the same tokens agree under the default quantized caches too.
TEST(GoldenForward, QuantizedCachesPrefillEqualsDecode) {
  const Result all = run_split("dense", 1000, CacheTypes{});
  const Result decode = run_split("dense", 1, CacheTypes{});
  EXPECT_NEAR(all.relative, decode.relative, 1e-3);
}

// A step that asks for each sequence's last logits gives exactly those rows of the full step's
// (the sequences have different lengths; the head then runs on one row per sequence).
TEST(GoldenForward, LastTokenLogitsAreTheLastRows) {
  const std::string dir = kGolden + "sigmoid";
  const auto backend = make_backend("cpu");
  const auto tokens = testing::read_golden_tokens(dir);
  const std::vector<float> every = testing::run_golden_batch(*backend, dir, 1000, kExact);
  const std::vector<float> last = testing::run_golden_last_logits(*backend, dir, kExact);
  const size_t V = size_t(load_model_config(dir).vocab_size);
  ASSERT_EQ(last.size(), tokens.size() * V);
  size_t end = 0;
  for (size_t s = 0; s < tokens.size(); ++s) {
    end += tokens[s].size();
    const std::vector<float> want(every.begin() + long((end - 1) * V), every.begin() + long(end * V));
    EXPECT_EQ(std::vector<float>(last.begin() + long(s * V), last.begin() + long((s + 1) * V)), want)
        << "sequence " << s;
  }
}

}  // namespace
}  // namespace tetra
