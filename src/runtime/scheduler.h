#pragma once
// Continuous batching: one thread runs the model step after step over every running sequence.
// New requests join between steps; prompts are prefilled in chunks of a fixed size (so a
// sequence's rows never depend on what else is in the batch) while running decodes keep taking
// one token per step. Each sequence reserves its cache blocks when admitted: when the pool is
// short a request waits in a bounded queue, and beyond that it is refused.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "backend/backend.h"
#include "model/forward.h"
#include "runtime/cache_blocks.h"
#include "runtime/sampler.h"
#include "runtime/speculation.h"
#include "runtime/token_constraint.h"

namespace tetra {

struct GenerationRequest {
  std::vector<int32_t> prompt;  // non-empty
  SamplingParams sampling;
  int64_t max_tokens = 16;
  std::vector<int32_t> stop_token_ids;  // end the sequence without being reported (e.g. EOS)
  MakeTokenConstraint constraint;       // none: any token; the sequence stops when it is complete
};

enum class FinishReason { stop, length, cancelled, error };

// Receives one request's tokens, on the scheduler's thread: keep the callbacks short.
class TokenSink {
 public:
  virtual ~TokenSink() = default;
  // Returns false to end the sequence here (a stop string matched, the client went away).
  virtual bool on_token(const SampledToken& token) = 0;
  // Called exactly once per accepted request; `error` is set for FinishReason::error.
  virtual void on_finish(FinishReason reason, const std::string& error) = 0;
};

struct SchedulerOptions {
  int64_t max_running = 64;     // sequences in one step
  int64_t max_queued = 256;     // admitted requests waiting for cache blocks; more are refused
  int64_t prefill_chunk = 64;   // prompt tokens of one sequence per step
  int64_t step_tokens = 512;    // tokens of one step (decodes first, then prefill chunks)
  SpeculativeMethod speculation = SpeculativeMethod::off;  // drafts checked in decode steps (runtime/speculation.h)
};

class Scheduler {
 public:
  // Speculation by MTP needs a model with its MTP block, and `geometry` counting its layer.
  Scheduler(Model& model, Backend& backend, const CacheGeometry& geometry, int64_t pool_blocks, SchedulerOptions options);
  ~Scheduler();  // cancels whatever is still running or queued
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  enum class Admission { accepted, queue_full, too_large };
  struct Submitted {
    Admission admission;
    uint64_t id = 0;  // for cancel(); valid when accepted
  };
  Submitted submit(GenerationRequest request, std::shared_ptr<TokenSink> sink);

  // Ends the request before its next step and frees its blocks; no-op for finished ones.
  void cancel(uint64_t id);

  // Ends every running and queued request (shutdown).
  void cancel_all();

  struct Stats {
    int64_t running = 0, queued = 0, blocks_in_use = 0, blocks_total = 0;
    int64_t draft_tokens = 0, accepted_draft_tokens = 0;  // since start
  };
  Stats stats() const;
  int64_t blocks_needed(int64_t tokens) const { return geometry_.blocks_for(tokens); }
  const CacheGeometry& geometry() const { return geometry_; }

 private:
  struct Sequence;
  // A step's sequences, the tokens each brings and how many of its last rows get logits.
  struct StepPlan {
    std::vector<Sequence*> chosen;
    std::vector<std::vector<int32_t>> tokens;
    std::vector<int64_t> logit_rows;  // a decode's every row, a prefill chunk's last
  };
  // A sequence's draw from one of its rows of a step: the token, or why there is none.
  struct SampledDraw {
    SampledToken token;
    std::optional<std::string> error;
  };
  void run();
  void admit_waiting();
  void drop_cancelled();
  StepPlan plan_step();
  void step();
  // Takes a draw as s's next token: an error or a stop token ends s; else s streams it and ends
  // at its limit or its constraint's end. Whether the token was taken (it counts toward a draft).
  bool take_draw(Sequence& s, const SampledDraw& draw);
  // The MTP block over the rows each sequence of a step kept (hidden: the step's streams,
  // first_row: each one's first row there): every position gets its MTP cache row, and each
  // decoding sequence its draft.
  void draft_with_mtp(const std::vector<Sequence*>& stepped, const std::vector<int64_t>& first_row,
                      const std::vector<int64_t>& kept, const std::vector<std::vector<int32_t>>& tokens, const Tensor& hidden);
  void finish(Sequence& s, FinishReason reason, const std::string& error);

  Model& model_;
  Backend& backend_;
  CacheGeometry geometry_;
  CacheBlockPool pool_;
  SchedulerOptions options_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  uint64_t next_id_ = 1;
  std::deque<std::unique_ptr<Sequence>> waiting_;  // guarded by mutex_
  std::unordered_set<uint64_t> cancelled_;         // guarded by mutex_
  bool cancel_all_ = false;                        // guarded by mutex_
  std::vector<std::unique_ptr<Sequence>> running_;  // the scheduler thread's own
  std::atomic<int64_t> running_count_{0};
  std::atomic<int64_t> draft_tokens_{0}, accepted_draft_tokens_{0};
  std::random_device entropy_;  // seeds for requests without one; guarded by mutex_
  std::thread thread_;
};

}  // namespace tetra
