// Model::drop_last_token, what speculative decoding rests on: a step fed a sequence's next token
// and a draft, with a wrong draft taken back, leaves the sequence as if it had been fed its real
// tokens one at a time, in every layer kind (window, CSA, HCA, the MTP block) and across the
// window ring's and the compressors' wrap-arounds.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "model/forward.h"
#include "support/tiny_model.h"

namespace tetra {
namespace {

double max_difference(const float* a, const float* b, size_t n) {
  double d = 0;
  for (size_t i = 0; i < n; ++i) d = std::max(d, std::fabs(double(a[i]) - double(b[i])));
  return d;
}

// The tiny test model with its MTP block.
testing::TinyModel tiny_mtp_model() {
  testing::TinyCheckpointOptions o;
  o.with_mtp = true;
  return testing::TinyModel(o);
}

class Rewind : public ::testing::TestWithParam<CacheTypes> {};

TEST_P(Rewind, RejectedDraftsLeaveNoTrace) {
  const testing::TinyModel tiny = tiny_mtp_model();
  const ModelConfig& c = tiny.config;
  const auto be = make_backend("cpu");
  Model model(c, *tiny.weights, *be, GetParam());
  const size_t vocab = size_t(c.vocab_size);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 48; ++i) tokens.push_back(int32_t((i * 29 + 7) % c.vocab_size));  // past several windows of 8

  // One token a step: each position's logits and its MTP draft logits.
  SequenceState plain = model.new_sequence();
  std::vector<float> want, want_draft;
  for (size_t t = 0; t + 1 < tokens.size(); ++t) {
    const auto out = model.step({&plain}, {{tokens[t]}});
    const auto l = be->download(out.logits);
    want.insert(want.end(), l.begin(), l.end());
    const auto d = be->download(model.mtp_logits(0, {&plain}, out.hidden, {{tokens[t + 1]}}));
    want_draft.insert(want_draft.end(), d.begin(), d.end());
  }

  // Steps of the next token and, every other step, a draft: the real token every other time,
  // else a wrong one, taken back; the MTP block sees the kept rows.
  SequenceState spec = model.new_sequence();
  size_t t = 0;
  for (int step = 0; t + 1 < tokens.size(); ++step) {
    const size_t drafts = size_t(step % 2), right = size_t(step / 2 % 2) * drafts;
    std::vector<int32_t> fed{tokens[t]};
    for (size_t j = 0; j < drafts; ++j) {
      const size_t p = t + 1 + j;
      const int32_t real = p < tokens.size() ? tokens[p] : 0;
      fed.push_back(j < right ? real : int32_t((real + 1 + int32_t(step)) % c.vocab_size));
    }
    const size_t kept = std::min(1 + right, tokens.size() - 1 - t);  // rows whose input is real
    const auto out = model.step({&spec}, {fed});
    const auto l = be->download(out.logits);
    ASSERT_EQ(l.size(), fed.size() * vocab);
    for (size_t r = 0; r < kept; ++r)
      EXPECT_EQ(max_difference(l.data() + r * vocab, want.data() + (t + r) * vocab, vocab), 0.0)
          << "position " << t + r << " (step " << step << ", row " << r << " of " << fed.size() << ")";
    if (fed.size() > kept) model.drop_last_token(spec);
    ASSERT_EQ(spec.length, int64_t(t + kept));
    std::vector<int32_t> next(tokens.begin() + long(t) + 1, tokens.begin() + long(t + kept) + 1);
    const auto d = be->download(
        model.mtp_logits(0, {&spec}, be->slice_rows(out.hidden, 0, int64_t(kept)), {next}, LogitRows::last_of_each_sequence()));
    EXPECT_EQ(max_difference(d.data(), want_draft.data() + (t + kept - 1) * vocab, vocab), 0.0) << "draft at position " << t + kept - 1;
    t += kept;
  }
}

INSTANTIATE_TEST_SUITE_P(Caches, Rewind,
                         ::testing::Values(CacheTypes{}, CacheTypes{KvCacheDtype::f32, IndexerCacheDtype::f32}),
                         [](const ::testing::TestParamInfo<CacheTypes>& info) {
                           return info.param.kv == KvCacheDtype::f32 ? std::string("f32") : std::string("default");
                         });

TEST(Rewind, OnlyATokenTheSequenceHolds) {
  const testing::TinyModel tiny = tiny_mtp_model();
  const auto be = make_backend("cpu");
  Model model(tiny.config, *tiny.weights, *be, CacheTypes{});
  SequenceState s = model.new_sequence();
  EXPECT_THROW(model.drop_last_token(s), Error);
  model.step({&s}, {{1, 2}});
  Model other(tiny.config, *tiny.weights, *be, CacheTypes{});
  EXPECT_THROW(other.drop_last_token(s), Error);
  model.drop_last_token(s);
  EXPECT_EQ(s.length, 1);
}

// Logits of the last few rows of each sequence equal those rows of every token's logits.
TEST(LogitRows, LastRowsOfEachSequence) {
  const testing::TinyModel tiny = tiny_mtp_model();
  const ModelConfig& c = tiny.config;
  const auto be = make_backend("cpu");
  Model a(c, *tiny.weights, *be, CacheTypes{}), b(c, *tiny.weights, *be, CacheTypes{});
  SequenceState a1 = a.new_sequence(), a2 = a.new_sequence(), b1 = b.new_sequence(), b2 = b.new_sequence();
  const std::vector<std::vector<int32_t>> tokens{{5, 6, 7, 8, 9}, {10, 11, 12}};
  const auto every = be->download(a.step({&a1, &a2}, tokens).logits);
  const auto last = be->download(b.step({&b1, &b2}, tokens, LogitRows::last({2, 3})).logits);
  const size_t v = size_t(c.vocab_size);
  ASSERT_EQ(last.size(), 5 * v);
  const size_t rows[] = {3, 4, 5, 6, 7};  // rows 3-4 of the first sequence, all three of the second
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(max_difference(last.data() + i * v, every.data() + rows[i] * v, v), 0.0) << i;
  SequenceState b3 = b.new_sequence();
  EXPECT_THROW(b.step({&b3}, {{1, 2}}, LogitRows::last({3})), Error);  // more rows than it has
}

}  // namespace
}  // namespace tetra
