// What drawing a token costs the host at a vocabulary's size: Sampler::sample on synthetic logits
// (N(0, 2.5) with 20 tokens 12 above: a peaked head over a long tail), per row on one thread and
// for a batch of rows drawn side by side as the scheduler draws a step's sequences. Prints one
// JSON object a configuration: microseconds a row, and a batch's milliseconds.
// Usage: tetra_sampler_bench [VOCAB (129280)] [BATCH (32)] [ROWS (40)]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "runtime/sampler.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Case {
  const char* name;
  tetra::SamplingParams params;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  auto add = [&](const char* name, auto&& set) {
    tetra::SamplingParams p;
    p.seed = 7;
    set(p);
    c.push_back({name, p});
  };
  add("greedy", [](auto& p) { p.temperature = 0; });
  add("temperature 1", [](auto& p) { p.temperature = 1; });
  add("temperature 0.8, top_p 0.95", [](auto& p) { p.temperature = 0.8, p.top_p = 0.95; });
  add("temperature 0.7, top_k 50", [](auto& p) { p.temperature = 0.7, p.top_k = 50; });
  add("temperature 0.6, min_p 0.05", [](auto& p) { p.temperature = 0.6, p.min_p = 0.05; });
  add("greedy, top_logprobs 5", [](auto& p) { p.temperature = 0, p.logprobs = true, p.top_logprobs = 5; });
  add("temperature 1, repetition_penalty 1.1", [](auto& p) { p.repetition_penalty = 1.1; });
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const size_t vocab = argc > 1 ? std::stoul(argv[1]) : 129280;
    const int batch = argc > 2 ? std::stoi(argv[2]) : 32;
    const int rows = argc > 3 ? std::stoi(argv[3]) : 40;
    if (vocab < 1 || batch < 1 || rows < 1) {
      std::fputs("usage: tetra_sampler_bench [VOCAB] [BATCH] [ROWS]\n", stderr);
      return 2;
    }
    std::mt19937 g(1);
    std::normal_distribution<float> noise(0.0f, 2.5f);
    std::vector<float> logits(vocab * size_t(batch));
    for (float& l : logits) l = noise(g);
    for (int r = 0; r < batch; ++r)
      for (int i = 0; i < 20; ++i) logits[size_t(r) * vocab + g() % vocab] += 12.0f;
    std::vector<int32_t> prompt(256);
    for (auto& id : prompt) id = int32_t(g() % vocab);
    for (const Case& c : cases()) {
      // One thread: the best of three runs of `rows` draws.
      tetra::Sampler one(c.params, prompt, 1);
      double row_seconds = 1e30;
      for (int run = 0; run < 3; ++run) {
        const auto t0 = Clock::now();
        for (int i = 0; i < rows; ++i) one.sample(std::span<const float>(logits).first(vocab));
        row_seconds = std::min(row_seconds, seconds_since(t0) / rows);
      }
      // A batch: each row's own sampler, side by side (the scheduler's loop).
      std::vector<tetra::Sampler> samplers;
      for (int r = 0; r < batch; ++r) samplers.emplace_back(c.params, prompt, uint64_t(r));
      double batch_seconds = 1e30;
      for (int run = 0; run < 5; ++run) {
        const auto t0 = Clock::now();
#pragma omp parallel for schedule(dynamic)
        for (int r = 0; r < batch; ++r) samplers[size_t(r)].sample(std::span<const float>(logits).subspan(size_t(r) * vocab, vocab));
        batch_seconds = std::min(batch_seconds, seconds_since(t0));
      }
      std::printf("{\"case\": \"%s\", \"vocab\": %zu, \"us_per_row\": %.1f, \"batch\": %d, \"threads\": %d, \"batch_ms\": %.3f}\n",
                  c.name, vocab, row_seconds * 1e6, batch, omp_get_max_threads(), batch_seconds * 1e3);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tetra_sampler_bench: %s\n", e.what());
    return 1;
  }
}
