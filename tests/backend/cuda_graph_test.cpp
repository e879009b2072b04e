// Decode steps replayed from CUDA graphs against the same steps run eagerly: bit-identical
// logits and identical greedy tokens over several steps, batch sizes (buckets 1, 4, 8, with
// padding rows) and sequences finishing mid-way, one token a sequence or two (a speculative
// step's input and draft, the draft taken back when it is wrong).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>

#include "io/safetensors.h"
#include "model/forward.h"
#include "backend/cuda/capture_arena.h"
#include "support/cuda_parity.h"
#include "support/tiny_model.h"

namespace tetra {
namespace {

struct DecodeRun {
  std::vector<float> logits;  // every decode step's logits, in order
  std::vector<int32_t> tokens;
  int64_t steps = 0;  // decode steps (prefill excluded)
};

// Prefills `batch` prompts of different lengths in one eager step, then decodes greedily: each
// step every sequence that has not reached its own number of decode steps. With `speculate`,
// each step feeds a sequence's next token and a draft of the one after (the next token again:
// right where the random model repeats itself), keeping the draft's row when it was right.
DecodeRun decode(Model& model, Backend& be, int64_t batch, std::mt19937 rng, bool speculate = false) {
  const int64_t vocab = model.config().vocab_size;
  std::vector<SequenceState> states;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int64_t> steps;
  for (int64_t s = 0; s < batch; ++s) {
    states.push_back(model.new_sequence());
    std::vector<int32_t> p(size_t(3 + 5 * s));
    for (auto& id : p) id = int32_t(rng() % uint32_t(vocab));
    prompts.push_back(p);
    steps.push_back(9 - s % 3);  // sequences finish at different steps: the batch shrinks
  }
  std::vector<SequenceState*> all;
  for (auto& s : states) all.push_back(&s);
  const std::vector<float> first = be.download(model.step(all, prompts).logits);
  std::vector<int32_t> next;
  int64_t row = 0;
  for (int64_t s = 0; s < batch; ++s) {
    row += int64_t(prompts[size_t(s)].size());
    const float* l = first.data() + (row - 1) * vocab;
    next.push_back(int32_t(std::max_element(l, l + vocab) - l));
  }
  DecodeRun run;
  for (int64_t k = 0;; ++k) {
    std::vector<SequenceState*> active;
    std::vector<std::vector<int32_t>> tokens;
    std::vector<size_t> which;
    for (int64_t s = 0; s < batch; ++s)
      if (k < steps[size_t(s)]) {
        active.push_back(&states[size_t(s)]);
        tokens.push_back({next[size_t(s)]});
        if (speculate) tokens.back().push_back(next[size_t(s)]);
        which.push_back(size_t(s));
      }
    if (active.empty()) break;
    const std::vector<float> logits = be.download(model.step(active, tokens).logits);
    run.logits.insert(run.logits.end(), logits.begin(), logits.end());
    ++run.steps;
    const int64_t rows = speculate ? 2 : 1;
    auto argmax = [&](int64_t row) {
      const float* l = logits.data() + row * vocab;
      return int32_t(std::max_element(l, l + vocab) - l);
    };
    for (size_t i = 0; i < which.size(); ++i) {
      int32_t t = argmax(int64_t(i) * rows);
      if (speculate && t == tokens[i][1]) {
        run.tokens.push_back(t);
        t = argmax(int64_t(i) * rows + 1);
      } else if (speculate) {
        model.drop_last_token(*active[i]);
      }
      next[which[i]] = t;
      run.tokens.push_back(t);
    }
  }
  return run;
}

// The tiny checkpoint in a temporary directory, for the lifetime of a test.

// One test per cache type, so that compute-sanitizer can run them as parallel jobs.
class CudaGraphReplay : public ::testing::TestWithParam<CacheTypes> {};

TEST_P(CudaGraphReplay, EqualsEagerBitForBit) {
  TETRA_REQUIRE_GPU();
  const testing::TinyModel tiny;
  const auto be = make_cuda_backend();
  Model graphs(tiny.config, *tiny.weights, *be, GetParam()), eager(tiny.config, *tiny.weights, *be, GetParam());
  eager.set_decode_graphs(false);
  for (const bool speculate : {false, true})
    for (int64_t batch : {1, 3, 5, 8}) {
      const DecodeRun want = decode(eager, *be, batch, std::mt19937(uint32_t(batch)), speculate);
      const DecodeRun got = decode(graphs, *be, batch, std::mt19937(uint32_t(batch)), speculate);
      ASSERT_EQ(got.logits.size(), want.logits.size());
      EXPECT_EQ(std::memcmp(got.logits.data(), want.logits.data(), want.logits.size() * sizeof(float)), 0)
          << "batch " << batch << (speculate ? ", speculating" : "") << ": replayed logits differ from eager ones";
      EXPECT_EQ(got.tokens, want.tokens) << "batch " << batch << (speculate ? ", speculating" : "");
    }
}

INSTANTIATE_TEST_SUITE_P(Caches, CudaGraphReplay,
                         ::testing::Values(CacheTypes{}, CacheTypes{KvCacheDtype::f32, IndexerCacheDtype::f32}),
                         [](const ::testing::TestParamInfo<CacheTypes>& info) {
                           return info.param.kv == KvCacheDtype::f32 ? std::string("f32") : std::string("default");
                         });

// A speculative step's two rows against the same positions fed one at a time (graphs on in both,
// so the two-row graphs too; every third draft wrong and taken back): bit for bit, which the
// README's "the same tokens with speculation" rests on (39 of 39 rows on an H100, 2026-12-07).
TEST(CudaSpeculation, TwoRowStepsAgreeWithOneRowSteps) {
  TETRA_REQUIRE_GPU();
  const testing::TinyModel tiny;
  const auto be = make_cuda_backend();
  const int64_t vocab = tiny.config.vocab_size;
  Model one(tiny.config, *tiny.weights, *be, CacheTypes{}), two(tiny.config, *tiny.weights, *be, CacheTypes{});
  std::mt19937 rng(3);
  std::vector<int32_t> tokens(41);
  for (auto& t : tokens) t = int32_t(rng() % uint32_t(vocab));
  SequenceState a = one.new_sequence(), b = two.new_sequence();
  std::vector<std::vector<float>> want;  // position i's logits
  for (const int32_t t : tokens) want.push_back(be->download(one.step({&a}, {{t}}).logits));
  two.step({&b}, {{tokens[0]}});
  double worst = 0;
  int64_t rows = 0, equal = 0;
  auto compare = [&](const std::vector<float>& got, size_t row, size_t position) {
    const std::vector<float> r(got.begin() + long(row) * vocab, got.begin() + long(row + 1) * vocab);
    const double d = testing::relative_difference(r, want[position]);
    worst = std::max(worst, d);
    ++rows;
    equal += d == 0;
  };
  for (size_t i = 1, step = 0; i + 1 < tokens.size(); ++step) {
    const bool wrong = step % 3 == 2;
    const int32_t draft = wrong ? int32_t((tokens[i + 1] + 1) % vocab) : tokens[i + 1];
    const std::vector<float> got = be->download(two.step({&b}, {{tokens[i], draft}}).logits);
    compare(got, 0, i);
    if (wrong) {
      two.drop_last_token(b);
      i += 1;
    } else {
      compare(got, 1, i + 1);
      i += 2;
    }
  }
  std::printf("two-row speculative steps: %lld of %lld rows bit-equal to one-row steps, worst relative difference %.3g\n",
              (long long)equal, (long long)rows, worst);
  EXPECT_EQ(equal, rows) << "worst relative difference " << worst;
}

// Step time of the same decode, eager and replayed: reported, not gated.
TEST(CudaGraph, StepTimeEagerAndReplayed) {
  TETRA_REQUIRE_GPU();
  const testing::TinyModel tiny;
  const auto be = make_cuda_backend();
  for (int64_t batch : {1, 8}) {
    double ms[2];
    for (int graphs = 0; graphs < 2; ++graphs) {
      Model model(tiny.config, *tiny.weights, *be, CacheTypes{});
      model.set_decode_graphs(graphs == 1);
      decode(model, *be, batch, std::mt19937(1));  // records the buckets
      const auto begin = std::chrono::steady_clock::now();
      const DecodeRun r = decode(model, *be, batch, std::mt19937(2));
      ms[graphs] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count() / double(r.steps);
    }
    std::printf("decode batch %lld (tiny model; the prefill and host work included): eager %.3f ms/step, graph %.3f ms/step\n",
                (long long)batch, ms[0], ms[1]);
  }
}

// The arena that holds a capture's tensors: first fit at 256-byte alignment, freed ranges
// reused and merged with their neighbours, a new chunk only when nothing fits.
TEST(CaptureArena, ReusesAndMergesFreedRanges) {
  TETRA_REQUIRE_GPU();
  cuda::CaptureArena arena;
  std::byte* a = static_cast<std::byte*>(arena.allocate(100));
  std::byte* b = static_cast<std::byte*>(arena.allocate(1000));
  std::byte* c = static_cast<std::byte*>(arena.allocate(300));
  EXPECT_EQ(b, a + 256);
  EXPECT_EQ(c, b + 1024);
  const size_t chunk = arena.reserved_bytes();
  arena.release(b);
  EXPECT_EQ(arena.allocate(500), b);  // the first hole that fits
  arena.release(a);
  arena.release(b);
  arena.release(c);
  EXPECT_EQ(arena.allocate(chunk), a);  // all three merged back into the whole chunk
  EXPECT_EQ(arena.reserved_bytes(), chunk);
  EXPECT_NE(arena.allocate(1), nullptr);  // nothing left in the first chunk: a second one
  EXPECT_GT(arena.reserved_bytes(), chunk);
}

// While a graph's two branches are recorded, a released range is not handed out again (the other
// branch may still be using it) until the releases resume.
TEST(CaptureArena, HeldReleasesStayTakenUntilResumed) {
  TETRA_REQUIRE_GPU();
  cuda::CaptureArena arena;
  std::byte* a = static_cast<std::byte*>(arena.allocate(1000));
  arena.hold_releases();
  arena.release(a);
  std::byte* b = static_cast<std::byte*>(arena.allocate(1000));
  EXPECT_EQ(b, a + 1024);  // a's range still taken
  arena.release(b);
  arena.resume_releases();
  EXPECT_EQ(arena.allocate(2048), a);  // both back, merged
}

}  // namespace
}  // namespace tetra
