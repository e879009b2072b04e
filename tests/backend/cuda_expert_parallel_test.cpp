// Expert parallelism on CUDA backends (model/replica.h, backend/cuda/cuda_comm_group.h): two ranks
// that split the routed experts give the logits of one backend holding them all, bit for bit,
// through both expert paths (the grouped tensor-core kernels of a prefill, the decode kernels),
// at V4-Flash's hidden size and attention with 16 NVFP4 experts (tests/data/v4_flash_attention,
// synthetic weights). The ranks share one GPU here, which the group's code treats as it treats
// two (peer reads, events across streams); several GPUs need a machine that has them.
#include <gtest/gtest.h>

#include <string>

#include "bench/synthetic_weights.h"
#include "model/forward.h"
#include "support/cuda_parity.h"
#include "support/tiny_model.h"

namespace tetra {
namespace {

// Every step's logits: two sequences' prompts (100 tokens: the grouped path; 7: the decode
// kernels), a chunk more of the first, then 6 decode steps of both.
std::vector<std::vector<float>> run(Model& model, Backend& first, int64_t vocab) {
  SequenceState a = model.new_sequence(), b = model.new_sequence();
  auto token = [&](int i) { return int32_t((i * 7919 + 13) % vocab); };
  std::vector<int32_t> pa, pb, more;
  for (int i = 0; i < 100; ++i) pa.push_back(token(i));
  for (int i = 0; i < 7; ++i) pb.push_back(token(500 + i));
  for (int i = 0; i < 70; ++i) more.push_back(token(900 + i));
  std::vector<std::vector<float>> logits;
  logits.push_back(first.download(model.step({&a, &b}, {pa, pb}, LogitRows::last_of_each_sequence()).logits));
  logits.push_back(first.download(model.step({&a}, {more}).logits));
  for (int t = 0; t < 6; ++t)
    logits.push_back(first.download(model.step({&a, &b}, {{token(2000 + t)}, {token(3000 + t)}}).logits));
  return logits;
}

TEST(CudaExpertParallel, TwoRanksGiveTheLogitsOfOneBackend) {
  TETRA_REQUIRE_GPU();
  const ModelConfig c = load_model_config(std::string(TETRA_SOURCE_DIR) + "/tests/data/v4_flash_attention");
  const bench::SyntheticWeights weights(c, bench::SyntheticFormat::nvfp4, 7);
  std::vector<std::vector<float>> want;
  {
    const auto one = make_backend("cuda");
    Model single(c, weights.weights(), *one, CacheTypes{});
    single.set_decode_graphs(false);  // as the ranks run (graphs replay eager steps' bits anyway)
    want = run(single, *one, c.vocab_size);
  }
  const auto r0 = make_backend("cuda"), r1 = make_backend("cuda");
  Model split(c, weights.weights(), std::vector<Backend*>{r0.get(), r1.get()}, CacheTypes{});
  ASSERT_EQ(split.ranks(), 2);
  const auto got = run(split, *r0, c.vocab_size);
  ASSERT_EQ(got.size(), want.size());
  for (size_t s = 0; s < want.size(); ++s) {
    ASSERT_EQ(got[s].size(), want[s].size()) << "step " << s;
    size_t differ = 0;
    for (size_t i = 0; i < want[s].size(); ++i) differ += got[s][i] != want[s][i];
    EXPECT_EQ(differ, 0u) << "step " << s << ": " << differ << " of " << want[s].size() << " logits differ";
  }
}

// The MTP block under expert parallelism: each rank gets the step's streams from the first
// (CommGroup::broadcast) and runs the block with its share of the block's experts. The tiny
// NVFP4 test model with an MTP block, decode steps of two sequences and their drafts' logits.
TEST(CudaExpertParallel, TwoRanksDraftWithTheMtpBlockLikeOne) {
  TETRA_REQUIRE_GPU();
  testing::TinyCheckpointOptions o;
  o.quant = testing::TinyQuant::nvfp4;
  o.with_mtp = true;
  const testing::TinyModel tiny(o);
  const ModelConfig& c = tiny.config;
  const ModelWeights& weights = *tiny.weights;
  auto drafts = [&](Model& model, Backend& first) {
    SequenceState a = model.new_sequence(), b = model.new_sequence();
    std::vector<std::vector<float>> out;
    model.step({&a, &b}, {{1, 2, 3, 4, 5}, {6, 7}});
    for (int t = 0; t < 12; ++t) {
      const int32_t x = int32_t((t * 31 + 3) % c.vocab_size), y = int32_t((t * 17 + 5) % c.vocab_size);
      const auto step = model.step({&a, &b}, {{x}, {y}});
      out.push_back(first.download(step.logits));
      out.push_back(first.download(model.mtp_logits(0, {&a, &b}, step.hidden, {{y}, {x}})));
    }
    return out;
  };
  std::vector<std::vector<float>> want;
  {
    const auto one = make_backend("cuda");
    Model single(c, weights, *one, CacheTypes{});
    single.set_decode_graphs(false);
    want = drafts(single, *one);
  }
  const auto r0 = make_backend("cuda"), r1 = make_backend("cuda");
  Model split(c, weights, std::vector<Backend*>{r0.get(), r1.get()}, CacheTypes{});
  const auto got = drafts(split, *r0);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << (i % 2 ? "draft" : "step") << " " << i / 2;
}

}  // namespace
}  // namespace tetra
