#pragma once
// The DeepSeek-V4 forward (SPEC.md), written once against the Backend interface: one batched
// step takes any number of new tokens per sequence (prefill chunks and single decode tokens
// alike) and continues each sequence from its SequenceState, whose attention state lives in the
// model's paged cache. Decode steps (one token per sequence) run as graphs recorded once per
// batch-size bucket where the backend records graphs. The model runs on one backend, or on
// several that split the routed experts between them (expert parallelism, model/replica.h):
// every backend runs the step, each on its own thread, and the first gives the logits.
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"
#include "model/kv_layout.h"
#include "model/paged_layout.h"
#include "model/replica.h"
#include "model/weights.h"
#include "runtime/sequence_state.h"

namespace tetra {

class Model {
 public:
  // Loads every weight into the backend (the CPU backend dequantizes exactly).
  Model(const ModelConfig& config, const ModelWeights& weights, Backend& backend, CacheTypes caches)
      : Model(config, weights, std::vector<Backend*>{&backend}, caches) {}
  // Expert parallelism over these backends, one rank each: each holds every weight but the
  // routed experts, of which rank r holds the r-th of as many consecutive ranges (ExpertShard).
  // The results are those of one backend holding every expert, bit for bit.
  Model(const ModelConfig& config, const ModelWeights& weights, std::vector<Backend*> backends, CacheTypes caches);
  ~Model();

  SequenceState new_sequence() const;
  // Sizes `s` for `tokens` tokens without running them (long-context benchmarks): it takes the
  // blocks of every main layer's state for that length plus `room` more tokens, zeroed, and sets
  // the length; a step then reads and writes exactly what it would at that length, and the next
  // `room` steps neither take blocks nor grow the block tables (which re-records decode graphs).
  void resize(SequenceState& s, int64_t tokens, int64_t room = 0);
  const PagedLayout& cache_layout() const;
  // Takes the cache pool's memory for `blocks` blocks now (a GPU server sizes it at start-up).
  void reserve_cache(int64_t blocks) { cache_->reserve_pool(blocks); }
  // Gives the cache pool's memory back (no sequence may hold blocks) with the decode graphs that
  // hold its addresses: what a benchmark's prefill needs after its long-context decode points.
  void release_cache();

  // Decode steps as recorded graphs (on by default; eager when off, on a backend without them, or
  // under expert parallelism).
  void set_decode_graphs(bool on) { decode_graphs_ = on && replicas_.size() == 1; }
  // Whether decode steps run as graphs (until a first decode step, whether they will try).
  bool decode_graphs() const { return decode_graphs_; }

  // Called in every step (eager while set: a recorded graph cannot call the host) with each main
  // layer's routing, experts [rows, k] i32: what a benchmark counts to price a step by the experts
  // its tokens touched. An empty function clears it.
  using RoutingObserver = tetra::RoutingObserver;
  void observe_routing(RoutingObserver observer) { replicas_.front()->observe_routing(std::move(observer)); }
  // Replaces main layer `layer`'s router bias (a score-routed layer's, n_routed_experts values):
  // what a synthetic model's calibration toward balanced loads sets, as training does.
  void set_router_bias(int64_t layer, const std::vector<float>& bias);
  bool has_router_bias(int64_t layer) const;

  using StepOutput = tetra::StepOutput;  // the first backend's
  // tokens[i] (non-empty) continue sequences[i]; token ids are checked against the vocab.
  StepOutput step(const std::vector<SequenceState*>& sequences, const std::vector<std::vector<int32_t>>& tokens,
                  const LogitRows& logit_rows = LogitRows::every_token());

  // Takes the last token of `s` back (a speculative step's rejected draft). Nothing else is
  // undone: the position's cache rows are rewritten when it runs again, and the rows its key
  // replaced (the window ring's and the pending rings' of the position a ring before it) are
  // ones no later position reads. A second token taken back would have replaced rows still read.
  void drop_last_token(SequenceState& s) const;

  // MTP block k, right after step(): `hidden` is that step's output and next[i] the tokens that
  // follow each of its tokens; gives the logits of the token after those, continuing the
  // block's own attention state in `sequences`. `hidden` is in the first backend's memory.
  Tensor mtp_logits(int64_t k, const std::vector<SequenceState*>& sequences, const Tensor& hidden,
                    const std::vector<std::vector<int32_t>>& next, const LogitRows& logit_rows = LogitRows::every_token());
  bool has_mtp() const { return has_mtp_; }
  // The backends the model runs on (more than one under expert parallelism).
  int64_t ranks() const { return int64_t(replicas_.size()); }

  const ModelConfig& config() const { return config_; }

 private:
  // Runs work(r) for every replica r, each on its own thread (the first on the caller's), and
  // rethrows the first failure once all have returned.
  void each_replica(const std::function<void(size_t)>& work);
  // work(replica) for every replica in turn on this thread, each with its backend bound (the
  // first's bound after).
  void in_turn(const std::function<void(ModelReplica&)>& work);
  std::vector<Backend*> backends() const;  // the replicas', in rank order
  // Checks a step's tokens and gives every sequence room for them in layers [begin, end).
  void prepare(const std::vector<SequenceState*>& sequences, const std::vector<std::vector<int32_t>>& tokens,
               bool already_counted, int64_t begin, int64_t end);
  // The i32 inputs of a step in one buffer (layout: ModelReplica::batch_views), padded to
  // `rows` rows; already_counted: the tokens are already in the lengths (MTP).
  std::vector<int32_t> step_inputs(const std::vector<SequenceState*>& sequences,
                                   const std::vector<std::vector<int32_t>>& tokens, bool already_counted,
                                   int64_t rows) const;
  // The same step on every replica, eagerly (`inputs` for `rows` rows).
  StepOutput run_eagerly(const std::vector<int32_t>& inputs, const std::vector<std::vector<int32_t>>& tokens,
                         int64_t rows, const LogitRows& logit_rows);

  ModelConfig config_;
  CacheTypes caches_;
  std::shared_ptr<PagedCache> cache_;
  std::vector<int64_t> ratios_;  // distinct_compress_ratios
  bool has_mtp_ = false;
  bool decode_graphs_ = true;
  bool warm_ = false;  // a first eager step has done the backends' one-time setup
  std::unique_ptr<CommGroup> group_;  // with more than one replica
  std::vector<std::unique_ptr<ModelReplica>> replicas_;
};

// Model::observe_routing for a scope: the observer is cleared when the scope ends (an exception too).
class ScopedRoutingObserver {
 public:
  ScopedRoutingObserver(Model& model, Model::RoutingObserver observer) : model_(model) {
    model_.observe_routing(std::move(observer));
  }
  ~ScopedRoutingObserver() { model_.observe_routing({}); }
  ScopedRoutingObserver(const ScopedRoutingObserver&) = delete;
  ScopedRoutingObserver& operator=(const ScopedRoutingObserver&) = delete;

 private:
  Model& model_;
};

}  // namespace tetra
