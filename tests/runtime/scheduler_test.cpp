// The scheduler on the tiny served model: batching (and the chunking of prompts) and speculation
// never change a sequence's tokens, seeds reproduce, cancellation frees blocks at once,
// admission queues or refuses instead of failing later.
#include "runtime/scheduler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <future>

#include "server/serving_model.h"

namespace tetra {
namespace {

using namespace std::chrono_literals;

class Collector : public TokenSink {
 public:
  explicit Collector(int64_t stop_after = -1) : stop_after_(stop_after) {}
  bool on_token(const SampledToken& t) override {
    std::lock_guard lock(mutex_);
    tokens_.push_back(t.id);
    return stop_after_ < 0 || int64_t(tokens_.size()) < stop_after_;
  }
  void on_finish(FinishReason reason, const std::string& error) override { done_.set_value(reason); }
  FinishReason wait() { return done_.get_future().get(); }
  std::vector<int32_t> tokens() {
    std::lock_guard lock(mutex_);
    return tokens_;
  }
  size_t count() {
    std::lock_guard lock(mutex_);
    return tokens_.size();
  }

 private:
  int64_t stop_after_;
  std::mutex mutex_;
  std::vector<int32_t> tokens_;
  std::promise<FinishReason> done_;
};

class SchedulerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = std::make_unique<server::ServingModel>(TETRA_SERVING_MODEL, "cpu", CacheTypes{KvCacheDtype::fp8, IndexerCacheDtype::fp4});
  }
  static void TearDownTestSuite() { model_.reset(); }

  std::unique_ptr<Scheduler> make(int64_t blocks, SchedulerOptions o = {}) {
    const CacheGeometry g(model_->config(), KvCacheDtype::fp8, IndexerCacheDtype::fp4,
                          o.speculation == SpeculativeMethod::mtp);
    return std::make_unique<Scheduler>(model_->model(), model_->backend(), g, blocks, o);
  }
  static GenerationRequest request(int seed, size_t length, int64_t max_tokens, double temperature = 0) {
    GenerationRequest r;
    for (size_t i = 0; i < length; ++i) r.prompt.push_back(int32_t((i * 37 + size_t(seed) * 11) % 250));
    r.max_tokens = max_tokens;
    r.sampling.temperature = temperature;
    r.sampling.seed = uint64_t(seed);
    return r;
  }

  static std::unique_ptr<server::ServingModel> model_;
};
std::unique_ptr<server::ServingModel> SchedulerTest::model_;

std::vector<std::vector<int32_t>> run_all(Scheduler& s, const std::vector<GenerationRequest>& requests, std::chrono::milliseconds stagger) {
  std::vector<std::shared_ptr<Collector>> sinks;
  for (const auto& r : requests) {
    sinks.push_back(std::make_shared<Collector>());
    EXPECT_EQ(s.submit(r, sinks.back()).admission, Scheduler::Admission::accepted);
    std::this_thread::sleep_for(stagger);
  }
  std::vector<std::vector<int32_t>> out;
  for (auto& c : sinks) {
    EXPECT_EQ(c->wait(), FinishReason::length);
    out.push_back(c->tokens());
  }
  return out;
}

TEST_F(SchedulerTest, BatchingAndChunkingNeverChangeTheTokens) {
  SchedulerOptions o;
  o.prefill_chunk = 16;
  o.step_tokens = 40;  // fewer than the prompts together: prefills wait their turn
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 8; ++i) requests.push_back(request(i, size_t(5 + 13 * i), 10, i % 2 ? 0.0 : 0.9));
  std::vector<std::vector<int32_t>> alone;
  for (const auto& r : requests) alone.push_back(run_all(*make(100000, o), {r}, 0ms)[0]);
  EXPECT_EQ(run_all(*make(100000, o), requests, 0ms), alone);
  EXPECT_EQ(run_all(*make(100000, o), requests, 3ms), alone);  // joining a running batch
}

// Prompts that repeat themselves, so that n-gram lookup drafts often and is right some of the time.
std::vector<GenerationRequest> repetitive_requests() {
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 6; ++i) {
    GenerationRequest r;
    for (int j = 0; j < 10 + 7 * i; ++j) r.prompt.push_back(int32_t((j % (3 + i)) * 17 + i));
    r.max_tokens = 24;
    r.sampling.temperature = i % 3 == 0 ? 0.0 : 0.8;
    r.sampling.seed = uint64_t(100 + i);
    requests.push_back(r);
  }
  return requests;
}

TEST_F(SchedulerTest, SpeculationNeverChangesTheTokens) {
  const auto requests = repetitive_requests();
  std::vector<std::vector<int32_t>> alone;
  for (const auto& r : requests) alone.push_back(run_all(*make(100000), {r}, 0ms)[0]);
  for (const SpeculativeMethod method : {SpeculativeMethod::ngram, SpeculativeMethod::mtp}) {
    SchedulerOptions o;
    o.speculation = method;
    o.prefill_chunk = 8;  // the MTP block follows the prompt chunk by chunk
    auto s = make(100000, o);
    EXPECT_EQ(run_all(*s, requests, 0ms), alone) << speculative_method_name(method);
    for (const auto& r : requests) EXPECT_EQ(run_all(*s, {r}, 0ms)[0], alone[&r - requests.data()]) << speculative_method_name(method);
    EXPECT_EQ(run_all(*s, requests, 2ms), alone) << speculative_method_name(method);  // joining a running batch
    const Scheduler::Stats st = s->stats();
    // Both outcomes happened: the looping random model's text repeats, so n-gram drafts are
    // taken; its random MTP block's drafts are taken back.
    EXPECT_GT(st.draft_tokens, 0) << speculative_method_name(method);
    if (method == SpeculativeMethod::ngram) {
      EXPECT_GT(st.accepted_draft_tokens, 0);
    } else {
      EXPECT_LT(st.accepted_draft_tokens, st.draft_tokens);
    }
    std::printf("%s: %lld of %lld drafts accepted\n", speculative_method_name(method), (long long)st.accepted_draft_tokens,
                (long long)st.draft_tokens);
  }
}

TEST_F(SchedulerTest, SpeculativeStepsStayInTheReservedBlocks) {
  // A draft is fed only when the request may still take its token: max_tokens 1 and 2 end
  // exactly where they would.
  SchedulerOptions o;
  o.speculation = SpeculativeMethod::ngram;
  auto s = make(100000, o);
  for (int64_t max_tokens : {1, 2, 3}) {
    GenerationRequest r = repetitive_requests()[1];
    r.max_tokens = max_tokens;
    const auto tokens = run_all(*s, {r}, 0ms)[0];
    EXPECT_EQ(int64_t(tokens.size()), max_tokens);
  }
  EXPECT_EQ(s->stats().blocks_in_use, 0);
}

TEST_F(SchedulerTest, CancelFreesTheBlocksAtOnce) {
  auto s = make(100000);
  auto sink = std::make_shared<Collector>();
  const auto submitted = s->submit(request(1, 20, 3000), sink);
  while (sink->count() < 3) std::this_thread::sleep_for(1ms);
  EXPECT_GT(s->stats().blocks_in_use, 0);
  s->cancel(submitted.id);
  EXPECT_EQ(sink->wait(), FinishReason::cancelled);
  EXPECT_EQ(s->stats().blocks_in_use, 0);
  EXPECT_LT(sink->count(), 3000u);
}

TEST_F(SchedulerTest, SinkCanStopASequence) {
  auto s = make(100000);
  auto sink = std::make_shared<Collector>(4);
  s->submit(request(2, 8, 100), sink);
  EXPECT_EQ(sink->wait(), FinishReason::stop);
  EXPECT_EQ(sink->count(), 4u);
}

// Complete after `length` tokens, whatever they are.
class CompleteAfter : public TokenConstraint {
 public:
  explicit CompleteAfter(size_t length) : left_(length) {}
  void mask(std::span<float>) override {}
  void advance(int32_t) override { --left_; }
  bool complete() const override { return left_ == 0; }

 private:
  size_t left_;
};

// The token that completes the constraint is reported and ends the sequence: with speculation
// too, where it can be the first of a step's two tokens.
TEST_F(SchedulerTest, ACompleteConstraintStopsTheSequence) {
  for (const auto method : {SpeculativeMethod::off, SpeculativeMethod::ngram, SpeculativeMethod::mtp}) {
    SchedulerOptions o;
    o.speculation = method;
    auto s = make(100000, o);
    std::vector<int32_t> unconstrained;
    for (const size_t length : {size_t(1), size_t(5), size_t(9)}) {
      GenerationRequest r = request(3, 12, 100);
      r.constraint = [length] { return std::make_unique<CompleteAfter>(length); };
      auto sink = std::make_shared<Collector>();
      ASSERT_EQ(s->submit(r, sink).admission, Scheduler::Admission::accepted);
      EXPECT_EQ(sink->wait(), FinishReason::stop);
      EXPECT_EQ(sink->count(), length);
      if (length == 9) unconstrained = sink->tokens();
    }
    auto sink = std::make_shared<Collector>();
    s->submit(request(3, 12, 9), sink);
    EXPECT_EQ(sink->wait(), FinishReason::length);
    EXPECT_EQ(sink->tokens(), unconstrained);
    EXPECT_EQ(s->stats().blocks_in_use, 0);
  }
}

TEST_F(SchedulerTest, AdmissionQueuesThenRefuses) {
  SchedulerOptions o;
  o.max_queued = 1;
  const CacheGeometry g(model_->config(), KvCacheDtype::fp8, IndexerCacheDtype::fp4);
  const int64_t one = g.blocks_for(20 + 2000);
  auto s = make(one, o);  // room for exactly one such sequence
  EXPECT_EQ(s->submit(request(1, 20, one * 4096), std::make_shared<Collector>()).admission, Scheduler::Admission::too_large);
  auto first = std::make_shared<Collector>(), second = std::make_shared<Collector>();
  const auto a = s->submit(request(1, 20, 2000), first);
  while (first->count() < 1) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(s->submit(request(2, 20, 2000), second).admission, Scheduler::Admission::accepted);
  EXPECT_EQ(s->stats().queued, 1);
  EXPECT_EQ(s->submit(request(3, 20, 2000), std::make_shared<Collector>()).admission, Scheduler::Admission::queue_full);
  s->cancel(a.id);  // frees the blocks: the queued one runs
  EXPECT_EQ(first->wait(), FinishReason::cancelled);
  while (second->count() < 1) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(s->stats().queued, 0);
}

}  // namespace
}  // namespace tetra
