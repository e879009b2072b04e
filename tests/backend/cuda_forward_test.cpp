// The whole forward on the CUDA backend against the CPU reference on the golden fixtures
// (tests/data/golden): in f32 (exact numerics, f32 caches) it must agree tightly; with the
// target numerics (bf16 linear inputs) and the default fp8/fp4 caches it reports the relative
// difference, argmax agreement and perplexity next to the CPU's. Also `tetra logits --device cuda`.
#include <cmath>
#include <cstdio>
#include <fstream>

#include "io/safetensors.h"
#include "model/forward.h"
#include "support/cuda_parity.h"
#include "support/golden_batch.h"

namespace tetra {
namespace {

const std::string kGolden = std::string(TETRA_SOURCE_DIR) + "/tests/data/golden/";

struct Comparison {
  double relative = 0, argmax_agreement = 0, perplexity = 0, reference_perplexity = 0;
};

double log_softmax_at(const float* row, int64_t vocab, int32_t token) {
  double m = row[0], s = 0;
  for (int64_t v = 0; v < vocab; ++v) m = std::max(m, double(row[v]));
  for (int64_t v = 0; v < vocab; ++v) s += std::exp(double(row[v]) - m);
  return double(row[token]) - m - std::log(s);
}

Comparison compare(const std::vector<float>& got, const std::vector<float>& want, const std::string& dir) {
  const int64_t vocab = load_model_config(dir).vocab_size;
  Comparison c;
  c.relative = testing::relative_difference(got, want);
  const int64_t positions = int64_t(want.size()) / vocab;
  int64_t agree = 0;
  for (int64_t p = 0; p < positions; ++p) {
    const auto g = std::max_element(got.begin() + p * vocab, got.begin() + (p + 1) * vocab) - (got.begin() + p * vocab);
    const auto w = std::max_element(want.begin() + p * vocab, want.begin() + (p + 1) * vocab) - (want.begin() + p * vocab);
    agree += g == w;
  }
  c.argmax_agreement = double(agree) / double(positions);
  // perplexity of each sequence's next tokens
  double nll_got = 0, nll_want = 0;
  int64_t count = 0, base = 0;
  for (const auto& seq : testing::read_golden_tokens(dir)) {
    for (size_t t = 0; t + 1 < seq.size(); ++t) {
      nll_got -= log_softmax_at(got.data() + (base + int64_t(t)) * vocab, vocab, seq[t + 1]);
      nll_want -= log_softmax_at(want.data() + (base + int64_t(t)) * vocab, vocab, seq[t + 1]);
      ++count;
    }
    base += int64_t(seq.size());
  }
  c.perplexity = std::exp(nll_got / double(count));
  c.reference_perplexity = std::exp(nll_want / double(count));
  return c;
}

// One test per fixture (and cache type), so compute-sanitizer can run them as parallel jobs.
class CudaForwardFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaForwardFixture, ExactNumericsMatchCpu) {
  TETRA_REQUIRE_GPU();
  const std::string name = GetParam();
  const CacheTypes f32_caches{KvCacheDtype::f32, IndexerCacheDtype::f32};
  const auto cpu = make_backend("cpu");
  const auto gpu = make_cuda_backend({.bf16_linear_inputs = false});
  for (int64_t prefill : {1000, 1, 13}) {
    const Comparison c = compare(testing::run_golden_batch(*gpu, kGolden + name, prefill, f32_caches),
                                 testing::run_golden_batch(*cpu, kGolden + name, prefill, f32_caches), kGolden + name);
    std::printf("f32 %-10s prefill %4lld: relative %.2e, argmax agreement %.4f\n", name.c_str(), (long long)prefill,
                c.relative, c.argmax_agreement);
    EXPECT_LT(c.relative, 1e-3) << name << " prefill " << prefill;
    EXPECT_EQ(c.argmax_agreement, 1.0) << name << " prefill " << prefill;
  }
  // each sequence's last logits alone (a server's prefill): the head on one row per sequence
  const double last = testing::relative_difference(testing::run_golden_last_logits(*gpu, kGolden + name, f32_caches),
                                                   testing::run_golden_last_logits(*cpu, kGolden + name, f32_caches));
  std::printf("f32 %-10s last logits only: relative %.2e\n", name.c_str(), last);
  EXPECT_LT(last, 1e-3) << name << " last logits only";
}

void expect_target_numerics(const std::string& name, CacheTypes caches) {
  const auto cpu = make_backend("cpu");
  const auto gpu = make_cuda_backend();
  for (int64_t prefill : {1000, 1}) {
    const Comparison c = compare(testing::run_golden_batch(*gpu, kGolden + name, prefill, caches),
                                 testing::run_golden_batch(*cpu, kGolden + name, prefill, caches), kGolden + name);
    std::printf("bf16 %-10s caches %s prefill %4lld: relative %.3e, argmax agreement %.4f, perplexity %.4f vs cpu %.4f\n",
                name.c_str(), caches.kv == KvCacheDtype::fp8 ? "fp8/fp4" : "f32/f32", (long long)prefill, c.relative,
                c.argmax_agreement, c.perplexity, c.reference_perplexity);
    // Random tiny models amplify bf16 roundings (DESIGN.md): bounds here catch broken ops,
    // the trained demo model is where the 1% / 95% targets apply.
    EXPECT_LT(c.relative, 0.25) << name;
    EXPECT_GE(c.argmax_agreement, 0.8) << name;
    EXPECT_LT(std::fabs(c.perplexity / c.reference_perplexity - 1), 0.1) << name;
  }
}

TEST_P(CudaForwardFixture, TargetNumericsWithQuantizedCaches) {
  TETRA_REQUIRE_GPU();
  expect_target_numerics(GetParam(), CacheTypes{});
}

TEST_P(CudaForwardFixture, TargetNumericsWithF32Caches) {
  TETRA_REQUIRE_GPU();
  expect_target_numerics(GetParam(), CacheTypes{KvCacheDtype::f32, IndexerCacheDtype::f32});
}

INSTANTIATE_TEST_SUITE_P(Golden, CudaForwardFixture, ::testing::Values("dense", "fp8_mxfp4", "nvfp4", "sigmoid"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(CudaForward, LogitsCliOnCuda) {
  TETRA_REQUIRE_GPU();
  const std::string dir = kGolden + "dense", work = ::testing::TempDir();
  // The golden sequences as read_golden_tokens gives them (cut short under compute-sanitizer).
  const std::string tokens = work + "/cuda_cli_tokens.json";
  {
    std::ofstream json(tokens);
    const char* separator = "[";
    for (const auto& seq : testing::read_golden_tokens(dir)) {
      json << separator << "[";
      for (size_t i = 0; i < seq.size(); ++i) json << (i ? "," : "") << seq[i];
      json << "]";
      separator = ",";
    }
    json << "]";
  }
  std::vector<float> results[2];
  const char* devices[2] = {"cpu", "cuda"};
  for (int i = 0; i < 2; ++i) {
    const std::string out = work + "/cuda_cli_" + devices[i] + ".f32";
    const std::string cmd = std::string(TETRA_BINARY) + " logits --model " + dir + " --tokens-file " + tokens +
                            " --prefill 5 --out " + out + " --device " + devices[i];
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream in(out, std::ios::binary | std::ios::ate);
    results[i].resize(size_t(in.tellg()) / sizeof(float));
    in.seekg(0);
    in.read(reinterpret_cast<char*>(results[i].data()), std::streamsize(results[i].size() * sizeof(float)));
  }
  ASSERT_EQ(results[1].size(), results[0].size());
  const Comparison c = compare(results[1], results[0], dir);
  std::printf("tetra logits --device cuda vs cpu (dense, prefill 5): relative %.3e, argmax agreement %.4f\n", c.relative,
              c.argmax_agreement);
  EXPECT_LT(c.relative, 0.25);
  EXPECT_GE(c.argmax_agreement, 0.8);
}

}  // namespace
}  // namespace tetra
