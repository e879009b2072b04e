#pragma once
// One backend's copy of a Model (model/forward.h): the weights it holds and the forward of a
// step on them. A model runs one replica, or one per rank of expert parallelism: each rank holds
// every weight but the routed experts, of which it holds its share, and the ranks add their
// experts' outputs through a CommGroup. Replicas share the model's paged cache (a pool each).
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/comm_group.h"
#include "model/config.h"
#include "model/kv_layout.h"
#include "model/weights.h"
#include "runtime/paged_cache.h"

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

struct StepOutput {
  Tensor logits;  // [total new tokens, vocab], sequences in order; [sequences, vocab] for last_of_each_sequence
  Tensor hidden;  // [total new tokens, hc·dim]: the last layer's streams (the MTP input)
};

// Called with each main layer's routing, experts [rows, k] i32.
using RoutingObserver = std::function<void(int64_t layer, const Tensor& experts)>;

// A replica's place among the ranks that split the routed experts: rank r holds the experts e
// with e·ranks / experts == r (consecutive ranges of equal size).
struct ExpertShard {
  int rank = 0, ranks = 1;
  CommGroup* group = nullptr;  // set when ranks > 1
  bool holds(int64_t expert, int64_t experts) const { return expert_owner(expert, ranks, experts) == rank; }
};

// The distinct compress ratios of the main layers, in layer order (a step's inputs carry an
// entry position for each).
std::vector<int64_t> distinct_compress_ratios(const ModelConfig& c);

class ModelReplica {
 public:
  // Loads every weight this replica holds into `backend` (the CPU backend dequantizes exactly);
  // its attention state is copy `cache_copy` of `cache`.
  ModelReplica(const ModelConfig& config, const ModelWeights& weights, Backend& backend, CacheTypes caches,
               std::shared_ptr<PagedCache> cache, size_t cache_copy, ExpertShard shard);
  ~ModelReplica();
  ModelReplica(const ModelReplica&) = delete;
  ModelReplica& operator=(const ModelReplica&) = delete;

  Backend& backend() { return be_; }

  // A step run eagerly: `inputs` laid out as Model::step_inputs writes them for `tokens`
  // (padded to `rows` rows).
  StepOutput run(const std::vector<int32_t>& inputs, const std::vector<std::vector<int32_t>>& tokens, int64_t rows,
                 const LogitRows& logit_rows);
  // A step of per_sequence tokens for each sequence, replayed from the graph of its
  // (per_sequence, bucket), recorded first when missing or when the cache moved; `inputs` are
  // padded to bucket·per_sequence rows. Every row's logits. Nothing when this backend runs
  // eagerly only.
  std::optional<StepOutput> run_graph(const std::vector<int32_t>& inputs, const std::vector<std::vector<int32_t>>& tokens,
                                      int64_t per_sequence, int64_t bucket);
  // MTP block k at the positions of `inputs` (laid out for `next`, already counted), from the
  // streams `hidden` of the step that produced them.
  Tensor mtp_logits(int64_t k, const std::vector<int32_t>& inputs, const std::vector<std::vector<int32_t>>& next,
                    const Tensor& hidden, const LogitRows& logit_rows);

  void clear_graphs();
  void observe_routing(RoutingObserver observer) { routing_observer_ = std::move(observer); }
  bool observes_routing() const { return bool(routing_observer_); }
  bool has_router_bias(int64_t layer) const;
  void set_router_bias(int64_t layer, const std::vector<float>& bias);

 private:
  struct Block;
  struct Batch;
  struct DecodeGraph;
  struct MtpExtras;
  StepOutput forward(const Batch& batch, const LogitRows& logit_rows);
  // The step's views of its uploaded inputs; tokens: its sequences' tokens (rows beyond them
  // are padding).
  Batch batch_views(const Tensor& inputs, const std::vector<std::vector<int32_t>>& tokens, int64_t rows) const;
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
  // The routed experts' sum; across ranks, each rank's slots added up first, so that the sum
  // is the one a single rank holding every expert gives.
  Tensor routed_experts(const Block& b, const Tensor& x, const Routing& r, const Batch& batch);
  // The logits of the rows `logit_rows` picks from streams h, whose rows are `batch`'s.
  Tensor head_logits(const Tensor& h, const Tensor& fn, const Tensor& base, const Tensor& scale, const Tensor& norm,
                     const Batch& batch, const LogitRows& logit_rows);

  ModelConfig config_;
  Backend& be_;
  CacheTypes caches_;
  std::shared_ptr<PagedCache> cache_;
  size_t cache_copy_;
  ExpertShard shard_;
  std::vector<int64_t> ratios_;  // distinct_compress_ratios
  RoutingObserver routing_observer_;
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<DecodeGraph>> graphs_;  // by (rows per sequence, bucket)
  Tensor embed_, head_, norm_, hc_head_fn_, hc_head_base_, hc_head_scale_;
  Tensor inv_freq_main_, inv_freq_compressed_;
  std::vector<std::unique_ptr<Block>> blocks_;  // main layers, then MTP blocks
  std::vector<std::unique_ptr<MtpExtras>> mtp_;
};

}  // namespace tetra
