// Expert parallelism (Model over several backends, model/replica.h): ranks that each hold a
// share of the routed experts give the logits of one backend holding them all, bit for bit, in
// prefill chunks and decode steps of several sequences; and the host group's sums and aborts.
#include <gtest/gtest.h>

#include <thread>

#include "backend/cpu/host_comm_group.h"
#include "core/error.h"
#include "model/forward.h"
#include "support/tiny_model.h"

namespace tetra {
namespace {

// The tiny test model in NVFP4 with its MTP block.
testing::TinyModel tiny_model() {
  testing::TinyCheckpointOptions o;
  o.quant = testing::TinyQuant::nvfp4;
  o.with_mtp = true;
  return testing::TinyModel(o);
}

// Every step's logits of two sequences: prompts of 13 and 6 tokens in chunks, then 24 decode
// steps each (past the tiny model's window of 8 and its compressors' windows).
// and of the MTP block after each decode step (its own attention state and experts split too).
std::vector<std::vector<float>> run(Model& model, Backend& first, int64_t vocab) {
  SequenceState a = model.new_sequence(), b = model.new_sequence();
  std::vector<std::vector<float>> logits;
  auto token = [&](int i) { return int32_t((i * 37 + 11) % vocab); };
  std::vector<int32_t> pa, pb;
  for (int i = 0; i < 13; ++i) pa.push_back(token(i));
  for (int i = 0; i < 6; ++i) pb.push_back(token(100 + i));
  logits.push_back(first.download(model.step({&a, &b}, {{pa.begin(), pa.begin() + 9}, pb}).logits));
  logits.push_back(first.download(model.step({&a}, {{pa.begin() + 9, pa.end()}}).logits));
  for (int t = 0; t < 24; ++t) {
    const auto out = model.step({&a, &b}, {{token(200 + t)}, {token(300 + t)}});
    logits.push_back(first.download(out.logits));
    logits.push_back(first.download(model.mtp_logits(0, {&a, &b}, out.hidden, {{token(400 + t)}, {token(500 + t)}})));
  }
  return logits;
}

TEST(ExpertParallel, RanksGiveTheLogitsOfOneBackend) {
  const testing::TinyModel tiny = tiny_model();
  const auto one = make_backend("cpu");
  Model single(tiny.config, *tiny.weights, *one, CacheTypes{});
  const auto want = run(single, *one, tiny.config.vocab_size);
  for (int ranks : {2, 3, 4}) {
    std::vector<std::unique_ptr<Backend>> owned;
    std::vector<Backend*> backends;
    for (int r = 0; r < ranks; ++r) backends.push_back(owned.emplace_back(make_backend("cpu")).get());
    Model split(tiny.config, *tiny.weights, backends, CacheTypes{});
    EXPECT_EQ(split.ranks(), ranks);
    const auto got = run(split, *backends[0], tiny.config.vocab_size);
    ASSERT_EQ(got.size(), want.size());
    for (size_t s = 0; s < want.size(); ++s) EXPECT_EQ(got[s], want[s]) << ranks << " ranks, step " << s;
  }
}

TEST(ExpertParallel, EveryExpertHasOneRank) {
  for (int64_t experts : {4, 7, 256})
    for (int ranks = 1; ranks <= 8 && ranks <= experts; ++ranks) {
      std::vector<int> held(size_t(ranks), 0);
      int previous = 0;
      for (int64_t e = 0; e < experts; ++e) {
        int owners = 0, owner = -1;
        for (int r = 0; r < ranks; ++r)
          if (ExpertShard{r, ranks}.holds(e, experts)) ++owners, owner = r;
        ASSERT_EQ(owners, 1) << "expert " << e << " of " << experts << ", " << ranks << " ranks";
        EXPECT_GE(owner, previous) << "ranks hold consecutive experts";
        previous = owner;
        ++held[size_t(owner)];
      }
      for (int r = 0; r < ranks; ++r) EXPECT_LE(held[size_t(r)], (experts + ranks - 1) / ranks);
    }
}

TEST(ExpertParallel, RefusesWhatItCannotSplit) {
  const testing::TinyModel tiny = tiny_model();
  std::vector<std::unique_ptr<Backend>> owned;
  std::vector<Backend*> backends;
  for (int r = 0; r < 5; ++r) backends.push_back(owned.emplace_back(make_backend("cpu")).get());
  // five ranks for four experts
  EXPECT_THROW(Model(tiny.config, *tiny.weights, backends, CacheTypes{}), Error);
  backends.resize(2);
  Model split(tiny.config, *tiny.weights, backends, CacheTypes{});
  SequenceState s = split.new_sequence();
  const auto out = split.step({&s}, {{1, 2, 3}});
  EXPECT_THROW(split.mtp_logits(0, {&s}, out.hidden, {{2, 3}}), Error);  // 2 tokens after 3 rows
}

TEST(HostCommGroup, SumsInRankOrderAndSurvivesAnAbort) {
  const auto be = make_backend("cpu");
  const auto group = make_host_comm_group(3);
  // Values whose sum depends on the order: 1e8 + 1 - 1e8 is 0 in f32 added left to right.
  const std::vector<std::vector<float>> values{{1e8f, 2}, {1, 3}, {-1e8f, 4}};
  std::vector<std::vector<float>> sums(3);
  auto reduce = [&](int r) {
    Tensor t = be->upload(values[size_t(r)], {2});
    group->all_reduce_sum(r, t);
    sums[size_t(r)] = be->download(t);
  };
  {
    std::jthread a(reduce, 1), b(reduce, 2);
    reduce(0);
  }
  for (const auto& s : sums) EXPECT_EQ(s, (std::vector<float>{(1e8f + 1) - 1e8f, 9})) << "every rank, the same bits";

  // Rank 1 fails before its part: the others stop waiting, and the group works again after.
  int aborted = 0;
  std::mutex m;
  auto waiting = [&](int r) {
    Tensor t = be->upload(values[size_t(r)], {2});
    try {
      group->all_reduce_sum(r, t);
    } catch (const CommAborted&) {
      std::lock_guard lock(m);
      ++aborted;
    }
  };
  {
    std::jthread a(waiting, 0), b(waiting, 2);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    group->abort();
  }
  EXPECT_EQ(aborted, 2);
  group->recover();
  {
    std::jthread a(reduce, 1), b(reduce, 2);
    reduce(0);
  }
  EXPECT_EQ(sums[2][1], 9.0f);

  Tensor i32 = be->upload_i32(std::vector<int32_t>{1}, {1});
  EXPECT_THROW(group->all_reduce_sum(0, i32), Error);
  EXPECT_THROW(make_host_comm_group(0), Error);
}

}  // namespace
}  // namespace tetra
