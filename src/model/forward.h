#pragma once
// The DeepSeek-V4 forward (SPEC.md), written once against the Backend interface: one batched
// step takes any number of new tokens per sequence (prefill chunks and single decode tokens
// alike) and continues each sequence from its SequenceState, whose attention state lives in the
// model's paged cache. Decode steps (one token per sequence) run as graphs recorded once per
// batch-size bucket where the backend records graphs.
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"
#include "model/kv_layout.h"
#include "model/paged_layout.h"
#include "model/weights.h"
#include "runtime/sequence_state.h"

namespace tetra {

// Which rows of a step get logits: every new token's (perplexity, logit dumps), or the last few
// of each sequence: its last token's (generation: a prefill chunk of 8192 tokens would otherwise
// run the head, a vocab × dim f32 matrix, 8192 times to sample once), or a speculative step's
// input and drafts.
struct LogitRows {
  static LogitRows every_token() { return {}; }
  static LogitRows last_of_each_sequence() { return {false, {}}; }
  // Sequence i's last counts[i] rows (1 to its token count).
  static LogitRows last(std::vector<int64_t> counts) { return {false, std::move(counts)}; }

  bool every = true;
  std::vector<int64_t> counts;  // when !every, per sequence; empty: one each
};

struct CacheTypes {
  KvCacheDtype kv = KvCacheDtype::fp8;
  IndexerCacheDtype indexer = IndexerCacheDtype::fp4;
};

class Model {
 public:
  // Loads every weight into the backend (the CPU backend dequantizes exactly).
  Model(const ModelConfig& config, const ModelWeights& weights, Backend& backend, CacheTypes caches);
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

  // Decode steps as recorded graphs (on by default; eager when off or on a backend without them).
  void set_decode_graphs(bool on) { decode_graphs_ = on; }
  // Whether decode steps run as graphs (until a first decode step, whether they will try).
  bool decode_graphs() const { return decode_graphs_; }

  // Called in every step (eager while set: a recorded graph cannot call the host) with each main
  // layer's routing, experts [rows, k] i32: what a benchmark counts to price a step by the experts
  // its tokens touched. An empty function clears it.
  using RoutingObserver = std::function<void(int64_t layer, const Tensor& experts)>;
  void observe_routing(RoutingObserver observer) { routing_observer_ = std::move(observer); }
  // Replaces main layer `layer`'s router bias (a score-routed layer's, n_routed_experts values):
  // what a synthetic model's calibration toward balanced loads sets, as training does.
  void set_router_bias(int64_t layer, const std::vector<float>& bias);
  bool has_router_bias(int64_t layer) const;

  struct StepOutput {
    Tensor logits;  // [total new tokens, vocab], sequences in order; [sequences, vocab] for last_of_each_sequence
    Tensor hidden;  // [total new tokens, hc·dim]: the last layer's streams (the MTP input)
  };
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
  // block's own attention state in `sequences`.
  Tensor mtp_logits(int64_t k, const std::vector<SequenceState*>& sequences, const Tensor& hidden,
                    const std::vector<std::vector<int32_t>>& next, const LogitRows& logit_rows = LogitRows::every_token());
  bool has_mtp() const { return !mtp_.empty(); }

  const ModelConfig& config() const { return config_; }

 private:
  struct Block;
  struct Batch;
  struct DecodeGraph;
  StepOutput forward(const Batch& batch, const LogitRows& logit_rows);
  StepOutput decode_with_graph(const std::vector<SequenceState*>& sequences, const std::vector<std::vector<int32_t>>& tokens,
                               int64_t per_sequence);
  // The streams h entering block b, with b's attention pre mix of them.
  Streams entering(const Block& b, Tensor h);
  // Block b from streams s: the streams after it, with next's attention pre mix of them when next
  // is set (every post update runs with the pre mix that follows it, one backend op).
  Streams block_forward(const Block& b, int64_t layer, const Streams& s, const Block* next, const Batch& batch);
  Tensor attention(const Block& b, int64_t layer, const Tensor& x, const Batch& batch);
  // The MoE's output: the routed experts' sum and the shared experts' (empty without them), which
  // the post update adds.
  struct MoeOutput {
    Tensor routed, shared;
  };
  MoeOutput moe(const Block& b, int64_t layer, const Tensor& x, const Batch& batch);
  // The logits of the rows `logit_rows` picks from streams h, whose rows are `batch`'s.
  Tensor head_logits(const Tensor& h, const Tensor& fn, const Tensor& base, const Tensor& scale, const Tensor& norm,
                     const Batch& batch, const LogitRows& logit_rows);
  // Checks a step's tokens and gives every sequence room for them in layers [begin, end).
  void prepare(const std::vector<SequenceState*>& sequences, const std::vector<std::vector<int32_t>>& tokens,
               bool already_counted, int64_t begin, int64_t end);
  // The i32 inputs of a step in one buffer (layout: batch_views), padded to `rows` rows;
  // already_counted: the tokens are already in the lengths (MTP).
  std::vector<int32_t> step_inputs(const std::vector<SequenceState*>& sequences,
                                   const std::vector<std::vector<int32_t>>& tokens, bool already_counted,
                                   int64_t rows) const;
  // The step's views of its uploaded inputs; tokens: its sequences' tokens (rows beyond them
  // are padding).
  Batch batch_views(const Tensor& inputs, const std::vector<std::vector<int32_t>>& tokens, int64_t rows) const;

  ModelConfig config_;
  Backend& be_;
  CacheTypes caches_;
  std::shared_ptr<PagedCache> cache_;
  std::vector<int64_t> ratios_;  // the distinct compress ratios of the main layers
  bool decode_graphs_ = true;
  RoutingObserver routing_observer_;
  bool warm_ = false;  // a first eager step has done the backend's one-time setup
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<DecodeGraph>> graphs_;  // by (rows per sequence, bucket)
  Tensor embed_, head_, norm_, hc_head_fn_, hc_head_base_, hc_head_scale_;
  Tensor inv_freq_main_, inv_freq_compressed_;
  std::vector<std::unique_ptr<Block>> blocks_;  // main layers, then MTP blocks
  struct MtpExtras;
  std::vector<std::unique_ptr<MtpExtras>> mtp_;
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
