#include "runtime/scheduler.h"

#include <algorithm>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/error.h"

namespace tetra {
namespace {

// Hands the memory of finished sequences back to the system when the last one is gone: glibc
// keeps freed memory in per-thread arenas otherwise, and an idle server would stay at its peak.
void release_free_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace

struct Scheduler::Sequence {
  uint64_t id;
  GenerationRequest request;
  std::shared_ptr<TokenSink> sink;
  Sampler sampler;
  int64_t blocks;
  SequenceState state;
  int64_t prefilled = 0;  // prompt tokens already through the model
  int64_t generated = 0;
  int32_t next_input = -1;  // the last sampled token, input of the next decode step
  bool finished = false;

  bool decoding() const { return prefilled == int64_t(request.prompt.size()); }
};

Scheduler::Scheduler(Model& model, Backend& backend, const CacheGeometry& geometry, int64_t pool_blocks,
                     SchedulerOptions options)
    : model_(model), backend_(backend), geometry_(geometry), pool_(pool_blocks), options_(options) {
  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  for (auto& s : running_) finish(*s, FinishReason::cancelled, "");
  for (auto& s : waiting_) s->sink->on_finish(FinishReason::cancelled, "");
}

Scheduler::Submitted Scheduler::submit(GenerationRequest request, std::shared_ptr<TokenSink> sink) {
  if (request.prompt.empty()) usage_error("a generation request needs at least one prompt token");
  const int64_t blocks = geometry_.blocks_for(int64_t(request.prompt.size()) + request.max_tokens);
  if (blocks > pool_.total()) return {Admission::too_large};
  std::unique_lock lock(mutex_);
  if (int64_t(waiting_.size()) >= options_.max_queued) return {Admission::queue_full};
  const uint64_t id = next_id_++;
  const uint64_t fallback_seed = (uint64_t(entropy_()) << 32) ^ entropy_();
  Sampler sampler(request.sampling, request.prompt, fallback_seed);
  waiting_.push_back(std::unique_ptr<Sequence>(
      new Sequence{id, std::move(request), std::move(sink), std::move(sampler), blocks, model_.new_sequence()}));
  lock.unlock();
  wake_.notify_all();
  return {Admission::accepted, id};
}

void Scheduler::cancel(uint64_t id) {
  std::unique_ptr<Sequence> queued;
  {
    std::lock_guard lock(mutex_);
    const auto it = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& s) { return s->id == id; });
    if (it != waiting_.end()) {
      queued = std::move(*it);
      waiting_.erase(it);
    } else {
      cancelled_.insert(id);
    }
  }
  if (queued) queued->sink->on_finish(FinishReason::cancelled, "");
  wake_.notify_all();
}

void Scheduler::cancel_all() {
  std::deque<std::unique_ptr<Sequence>> queued;
  {
    std::lock_guard lock(mutex_);
    queued.swap(waiting_);
    cancel_all_ = true;
  }
  for (auto& s : queued) s->sink->on_finish(FinishReason::cancelled, "");
  wake_.notify_all();
}

Scheduler::Stats Scheduler::stats() const {
  std::lock_guard lock(mutex_);
  return {running_count_.load(), int64_t(waiting_.size()), pool_.in_use(), pool_.total()};
}

void Scheduler::finish(Sequence& s, FinishReason reason, const std::string& error) {
  if (s.finished) return;
  s.finished = true;
  pool_.give_back(s.blocks);
  s.state = SequenceState{};  // the cache memory goes now, not when the entry is erased
  s.sink->on_finish(reason, error);
}

void Scheduler::admit_waiting() {
  std::lock_guard lock(mutex_);
  // First come, first served: a large request at the head is not overtaken by smaller ones.
  while (!waiting_.empty() && int64_t(running_.size()) < options_.max_running && pool_.try_take(waiting_.front()->blocks)) {
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  running_count_ = int64_t(running_.size());
}

void Scheduler::drop_cancelled() {
  std::unordered_set<uint64_t> ids;
  bool all = false;
  {
    std::lock_guard lock(mutex_);
    ids.swap(cancelled_);
    std::swap(all, cancel_all_);
  }
  for (auto& s : running_)
    if (all || ids.count(s->id)) finish(*s, FinishReason::cancelled, "");
}

void Scheduler::run() {
  while (true) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || cancel_all_ || !waiting_.empty() || !running_.empty() || !cancelled_.empty(); });
      if (stopping_) return;
    }
    const bool was_busy = !running_.empty();
    drop_cancelled();
    std::erase_if(running_, [](const auto& s) { return s->finished; });
    admit_waiting();
    if (!running_.empty()) {
      step();
      std::erase_if(running_, [](const auto& s) { return s->finished; });
      running_count_ = int64_t(running_.size());
    }
    if (was_busy && running_.empty()) release_free_memory();
  }
}

void Scheduler::step() {
  // Decodes first, one token each; then prefill chunks while the step's token budget lasts
  // (at least one chunk per step, so a long prompt always advances).
  std::vector<Sequence*> chosen;
  std::vector<std::vector<int32_t>> tokens;
  int64_t budget = options_.step_tokens;
  for (auto& s : running_) {
    if (!s->decoding()) continue;
    chosen.push_back(s.get());
    tokens.push_back({s->next_input});
    --budget;
  }
  for (auto& s : running_) {
    if (s->decoding()) continue;
    const int64_t n = std::min(options_.prefill_chunk, int64_t(s->request.prompt.size()) - s->prefilled);
    if (n > budget && !chosen.empty()) continue;
    const auto begin = s->request.prompt.begin() + s->prefilled;
    chosen.push_back(s.get());
    tokens.emplace_back(begin, begin + n);
    budget -= n;
  }

  std::vector<float> logits;
  std::vector<Sequence*> sampling;
  try {
    std::vector<SequenceState*> states;
    for (Sequence* s : chosen) states.push_back(&s->state);
    // A row of logits per sequence (its last token's); sampled once the prompt has been read.
    const Tensor last = model_.step(states, tokens, LogitRows::last_of_each_sequence).logits;
    std::vector<Tensor> rows;
    for (size_t i = 0; i < chosen.size(); ++i) {
      Sequence& s = *chosen[i];
      if (!s.decoding()) s.prefilled += int64_t(tokens[i].size());
      if (s.decoding()) {
        rows.push_back(backend_.slice_rows(last, int64_t(i), 1));
        sampling.push_back(&s);
      }
    }
    if (rows.size() == chosen.size())
      logits = backend_.download(last);
    else if (!rows.empty())
      logits = backend_.download(backend_.concat_rows(rows, {last.dim(1)}, ElemType::f32));
  } catch (const std::exception& e) {
    // The states of this step's sequences are unusable now; end them and keep serving the rest.
    for (Sequence* s : chosen) finish(*s, FinishReason::error, e.what());
    return;
  }

  const size_t vocab = sampling.empty() ? 0 : logits.size() / sampling.size();
  for (size_t i = 0; i < sampling.size(); ++i) {
    Sequence& s = *sampling[i];
    if (s.finished) continue;
    SampledToken t;
    try {
      t = s.sampler.sample(std::span<const float>(logits).subspan(i * vocab, vocab));
    } catch (const std::exception& e) {  // logits that are not finite: this sequence ends in an error
      finish(s, FinishReason::error, e.what());
      continue;
    }
    const auto& stops = s.request.stop_token_ids;
    if (std::find(stops.begin(), stops.end(), t.id) != stops.end()) {
      finish(s, FinishReason::stop, "");
      continue;
    }
    ++s.generated;
    if (!s.sink->on_token(t)) {
      finish(s, FinishReason::stop, "");
    } else if (s.generated >= s.request.max_tokens) {
      finish(s, FinishReason::length, "");
    } else {
      s.next_input = t.id;
    }
  }
}

}  // namespace tetra
