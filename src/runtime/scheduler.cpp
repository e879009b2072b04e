#include "runtime/scheduler.h"

#include <algorithm>
#include <optional>
#include <utility>

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
  int32_t next_input = -1;      // the last sampled token, input of the next decode step
  std::optional<int32_t> draft{};  // of the token after next_input, fed beside it
  NgramIndex ngrams{};  // of the prompt and generated tokens (n-gram drafts)
  bool finished = false;

  bool decoding() const { return prefilled == int64_t(request.prompt.size()); }
};

Scheduler::Scheduler(Model& model, Backend& backend, const CacheGeometry& geometry, int64_t pool_blocks,
                     SchedulerOptions options)
    : model_(model), backend_(backend), geometry_(geometry), pool_(pool_blocks), options_(options) {
  if (options_.speculation == SpeculativeMethod::mtp && !model_.has_mtp())
    runtime_error("speculation by MTP needs the checkpoint's MTP block (mtp.0.* tensors), which this model lacks");
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
  NgramIndex ngrams;  // indexed outside the lock: a long prompt takes a while
  if (options_.speculation == SpeculativeMethod::ngram)
    for (const int32_t t : request.prompt) ngrams.append(t);
  std::unique_ptr<TokenConstraint> constraint = request.constraint ? request.constraint() : nullptr;
  std::unique_lock lock(mutex_);
  if (int64_t(waiting_.size()) >= options_.max_queued) return {Admission::queue_full};
  const uint64_t id = next_id_++;
  const uint64_t fallback_seed = (uint64_t(entropy_()) << 32) ^ entropy_();
  Sampler sampler(request.sampling, request.prompt, fallback_seed, std::move(constraint));
  auto sequence = std::unique_ptr<Sequence>(
      new Sequence{id, std::move(request), std::move(sink), std::move(sampler), blocks, model_.new_sequence()});
  sequence->ngrams = std::move(ngrams);
  waiting_.push_back(std::move(sequence));
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
  return {running_count_.load(), int64_t(waiting_.size()), pool_.in_use(), pool_.total(), draft_tokens_.load(),
          accepted_draft_tokens_.load()};
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

Scheduler::StepPlan Scheduler::plan_step() {
  // Decodes first, one token each with its draft; then prefill chunks while the step's token
  // budget lasts (at least one chunk per step, so a long prompt always advances).
  StepPlan p;
  int64_t budget = options_.step_tokens;
  // A decode step runs as a graph only when every sequence brings as many tokens: where decode
  // steps are graphs, a step of decodes alone takes drafts only when each of them has one.
  const bool prefilling = std::any_of(running_.begin(), running_.end(), [](const auto& s) { return !s->decoding(); });
  const auto has_draft = [](const auto& s) { return !s->decoding() || s->draft.has_value(); };
  if (model_.decode_graphs() && !prefilling && !std::all_of(running_.begin(), running_.end(), has_draft))
    for (auto& s : running_) s->draft.reset();
  for (auto& s : running_) {
    if (!s->decoding()) continue;
    p.chosen.push_back(s.get());
    std::vector<int32_t>& t = p.tokens.emplace_back(1, s->next_input);
    if (s->draft) t.push_back(*s->draft);
    p.logit_rows.push_back(int64_t(t.size()));
    budget -= int64_t(t.size());
  }
  for (auto& s : running_) {
    if (s->decoding()) continue;
    const int64_t n = std::min(options_.prefill_chunk, int64_t(s->request.prompt.size()) - s->prefilled);
    if (n > budget && !p.chosen.empty()) continue;
    const auto begin = s->request.prompt.begin() + s->prefilled;
    p.chosen.push_back(s.get());
    p.tokens.emplace_back(begin, begin + n);
    p.logit_rows.push_back(1);
    budget -= n;
  }
  return p;
}

void Scheduler::step() {
  const StepPlan plan = plan_step();
  const std::vector<Sequence*>& chosen = plan.chosen;
  const std::vector<std::vector<int32_t>>& tokens = plan.tokens;
  const std::vector<int64_t>& logit_rows = plan.logit_rows;

  Model::StepOutput out;
  std::vector<float> logits;
  std::vector<bool> sampling(chosen.size());  // the prompt has been read: its rows are sampled
  try {
    std::vector<SequenceState*> states;
    for (Sequence* s : chosen) states.push_back(&s->state);
    out = model_.step(states, tokens, LogitRows::last(logit_rows));
    std::vector<Tensor> rows;
    int64_t offset = 0;
    for (size_t i = 0; i < chosen.size(); ++i) {
      Sequence& s = *chosen[i];
      if (!s.decoding()) s.prefilled += int64_t(tokens[i].size());
      if ((sampling[i] = s.decoding())) rows.push_back(backend_.slice_rows(out.logits, offset, logit_rows[i]));
      offset += logit_rows[i];
    }
    if (std::all_of(sampling.begin(), sampling.end(), [](bool b) { return b; }))
      logits = backend_.download(out.logits);
    else if (!rows.empty())
      logits = backend_.download(backend_.concat_rows(rows, {out.logits.dim(1)}, ElemType::f32));
  } catch (const std::exception& e) {
    // The states of this step's sequences are unusable now; end them and keep serving the rest.
    for (Sequence* s : chosen) finish(*s, FinishReason::error, e.what());
    return;
  }

  const int64_t vocab = out.logits.empty() ? 0 : out.logits.dim(1);
  std::vector<std::span<const float>> sampled_rows(chosen.size());
  for (int64_t i = 0, offset = 0; i < int64_t(chosen.size()); ++i)
    if (sampling[size_t(i)]) {
      sampled_rows[size_t(i)] = std::span<const float>(logits).subspan(size_t(offset * vocab), size_t(logit_rows[size_t(i)] * vocab));
      offset += logit_rows[size_t(i)];
    }
  // A draw reads the vocabulary (V4's 129k logits: 0.2-1 ms a row on one core), so the
  // sequences' rows are drawn side by side, each by its own sampler: first every input's row,
  // then the draft's row of those whose first token was the draft (that row holds the logits
  // after it). What follows a draw (stops, streaming, limits) runs in order between.
  auto draw_rows = [&](int64_t row, const std::vector<bool>& which) {
    std::vector<SampledDraw> draws(chosen.size());
#pragma omp parallel for schedule(dynamic)
    for (int64_t i = 0; i < int64_t(chosen.size()); ++i) {
      if (!which[size_t(i)]) continue;
      try {
        draws[size_t(i)].token = chosen[size_t(i)]->sampler.sample(sampled_rows[size_t(i)].subspan(size_t(row * vocab), size_t(vocab)));
      } catch (const std::exception& e) {  // logits that are not finite: this sequence ends in an error
        draws[size_t(i)].error = e.what();
      }
    }
    return draws;
  };
  std::vector<std::optional<int32_t>> drafts(chosen.size());
  for (size_t i = 0; i < chosen.size(); ++i)
    if (sampling[i]) drafts[i] = std::exchange(chosen[i]->draft, std::nullopt);
  const std::vector<SampledDraw> firsts = draw_rows(0, sampling);
  std::vector<bool> confirmed(chosen.size(), false);
  for (size_t i = 0; i < chosen.size(); ++i)
    if (sampling[i] && take_draw(*chosen[i], firsts[i]) && drafts[i] && firsts[i].token.id == *drafts[i]) {
      ++accepted_draft_tokens_;
      confirmed[i] = !chosen[i]->finished;
    }
  const std::vector<SampledDraw> seconds = draw_rows(1, confirmed);
  std::vector<int64_t> kept(chosen.size()), first_row(chosen.size());
  int64_t row = 0;
  for (size_t i = 0; i < chosen.size(); ++i) {
    kept[i] = int64_t(tokens[i].size());
    first_row[i] = row;
    row += kept[i];
    if (!sampling[i]) continue;
    if (confirmed[i]) take_draw(*chosen[i], seconds[i]);
    // a draft's row not drawn from (the first token was not the draft) is taken back
    const int64_t rows = drafts[i] ? 2 : 1, rejected = rows - (confirmed[i] ? 2 : 1);
    draft_tokens_ += rows - 1;
    if (!chosen[i]->finished && rejected > 0) model_.drop_last_token(chosen[i]->state);
    kept[i] -= rejected;
  }

  if (options_.speculation == SpeculativeMethod::mtp) draft_with_mtp(chosen, first_row, kept, tokens, out.hidden);
  if (options_.speculation == SpeculativeMethod::ngram)
    for (Sequence* s : chosen)
      if (!s->finished && s->decoding() && s->request.max_tokens - s->generated >= 2)  // room for the draft's token
        s->draft = s->ngrams.draft();
}

bool Scheduler::take_draw(Sequence& s, const SampledDraw& draw) {
  if (draw.error) {
    finish(s, FinishReason::error, *draw.error);
    return false;
  }
  const SampledToken& t = draw.token;
  const auto& stops = s.request.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), t.id) != stops.end()) {
    finish(s, FinishReason::stop, "");
    return false;
  }
  ++s.generated;
  if (options_.speculation == SpeculativeMethod::ngram) s.ngrams.append(t.id);
  if (!s.sink->on_token(t) || s.sampler.constraint_complete()) {
    finish(s, FinishReason::stop, "");
  } else if (s.generated >= s.request.max_tokens) {
    finish(s, FinishReason::length, "");
  } else {
    s.next_input = t.id;
  }
  return true;
}

void Scheduler::draft_with_mtp(const std::vector<Sequence*>& stepped, const std::vector<int64_t>& first_row,
                               const std::vector<int64_t>& kept, const std::vector<std::vector<int32_t>>& tokens,
                               const Tensor& hidden) {
  std::vector<Sequence*> drafting;
  std::vector<SequenceState*> states;
  std::vector<Tensor> rows;
  std::vector<std::vector<int32_t>> next;  // the token after each kept row
  for (size_t i = 0; i < stepped.size(); ++i) {
    Sequence& s = *stepped[i];
    if (s.finished) continue;
    const auto& t = tokens[i];
    std::vector<int32_t>& n = next.emplace_back(t.begin() + 1, t.begin() + kept[i]);
    n.push_back(s.decoding() ? s.next_input : s.request.prompt[size_t(s.prefilled)]);
    rows.push_back(backend_.slice_rows(hidden, first_row[i], kept[i]));
    states.push_back(&s.state);
    drafting.push_back(&s);
  }
  if (drafting.empty()) return;
  std::vector<float> logits;
  try {
    const Tensor h = backend_.concat_rows(rows, {hidden.dim(1)}, ElemType::f32);
    logits = backend_.download(model_.mtp_logits(0, states, h, next, LogitRows::last_of_each_sequence()));
  } catch (const std::exception& e) {
    for (Sequence* s : drafting) finish(*s, FinishReason::error, e.what());
    return;
  }
  const size_t vocab = logits.size() / drafting.size();
#pragma omp parallel for  // (each draft is a pass over the vocabulary)
  for (size_t i = 0; i < drafting.size(); ++i) {
    Sequence& s = *drafting[i];
    if (!s.decoding() || s.request.max_tokens - s.generated < 2) continue;  // no room for a draft's token
    const auto row = logits.begin() + std::ptrdiff_t(i * vocab);
    s.draft = int32_t(std::max_element(row, row + std::ptrdiff_t(vocab)) - row);
  }
}

}  // namespace tetra
