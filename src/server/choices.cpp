#include "server/choices.h"

namespace tetra::server {

Choices::Choices(const OpenAiRequest& r, const text::Tokenizer& tokenizer, const TextStream::TokenTiming& timing,
                 Scheduler& scheduler, const Submit& submit)
    : scheduler_(scheduler) {
  for (int64_t i = 0; i < r.n; ++i) {
    GenerationRequest g = r.generation;
    if (g.sampling.seed) *g.sampling.seed += uint64_t(i);
    auto stream = std::make_shared<TextStream>(tokenizer, r.stop, timing, doorbell_);
    try {
      sequences_.push_back(submit(g, stream));
    } catch (...) {
      abandon();
      throw;
    }
    streams_.push_back(std::move(stream));
    finished_.push_back(false);
  }
}

std::vector<std::pair<int64_t, TextStream::Update>> Choices::collect() {
  std::vector<std::pair<int64_t, TextStream::Update>> out;
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (finished_[i]) continue;
    TextStream::Update u = streams_[i]->wait(std::chrono::milliseconds(0));
    if (!u.finished && u.tokens.empty() && u.text.empty()) continue;
    finished_[i] = u.finished;
    out.emplace_back(int64_t(i), std::move(u));
  }
  return out;
}

std::vector<std::pair<int64_t, TextStream::Update>> Choices::wait(std::chrono::milliseconds timeout) {
  // A ring after `seen` is news that collect() may have missed: the wait then returns at once.
  const uint64_t seen = doorbell_->rings();
  auto out = collect();
  if (!out.empty()) return out;
  doorbell_->wait(seen, timeout);
  return collect();
}

bool Choices::finished() const {
  for (const bool f : finished_)
    if (!f) return false;
  return true;
}

void Choices::abandon() {
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (finished_[i]) continue;
    streams_[i]->abandon();
    scheduler_.cancel(sequences_[i]);
  }
}

}  // namespace tetra::server
