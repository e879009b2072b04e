#include "model/forward.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <thread>
#include <utility>

#include "core/error.h"

namespace tetra {
namespace {

// Decode graphs serve steps of one or two tokens a sequence (a speculative step's input and
// draft); longer uniform steps (prefill chunks) run eagerly.
constexpr int64_t kMaxGraphRowsPerSequence = 2;

// A step's logit rows name 1 to its tokens rows of each sequence.
void check_logit_rows(const LogitRows& logit_rows, const std::vector<std::vector<int32_t>>& tokens) {
  if (logit_rows.every || logit_rows.counts.empty()) return;
  if (logit_rows.counts.size() != tokens.size())
    runtime_error("logits asked for ", logit_rows.counts.size(), " sequences of a step of ", tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i)
    if (logit_rows.counts[i] < 1 || logit_rows.counts[i] > int64_t(tokens[i].size()))
      runtime_error("logits asked for ", logit_rows.counts[i], " rows of sequence ", i, ", which has ", tokens[i].size(),
                    " in this step");
}

}  // namespace

Model::Model(const ModelConfig& config, const ModelWeights& w, std::vector<Backend*> backends, CacheTypes caches)
    : config_(config), caches_(caches), ratios_(distinct_compress_ratios(config)), has_mtp_(w.has_mtp() && config.n_mtp_layers > 0) {
  const ModelConfig& c = config_;
  if (backends.empty()) runtime_error("a model needs a backend");
  const int ranks = int(backends.size());
  if (ranks > 1 && c.n_routed_experts < ranks)
    usage_error("expert parallelism over ", ranks, " ranks needs at least as many routed experts; the model has ",
                c.n_routed_experts);
  const int64_t n_mtp = w.has_mtp() ? c.n_mtp_layers : 0;
  cache_ = std::make_shared<PagedCache>(backends, PagedLayout(c, caches.kv, caches.indexer, c.n_layers + n_mtp));
  if (ranks > 1) {
    group_ = make_comm_group(backends);
    // The ranks meet on the host in every MoE layer, which a recorded graph cannot do.
    decode_graphs_ = false;
  }
  // rank r's weights go to its device
  tetra::in_turn(backends, [&](size_t r) {
    replicas_.push_back(std::make_unique<ModelReplica>(c, w, *backends[r], caches, cache_, r,
                                                       ExpertShard{int(r), ranks, group_.get()}));
  });
}

Model::~Model() {
  // each rank's memory goes back with its device bound (the first's with the caller's)
  tetra::in_turn(backends(), [&](size_t r) {
    if (r > 0) replicas_[r].reset();
  });
}

std::vector<Backend*> Model::backends() const {
  std::vector<Backend*> b;
  for (const auto& r : replicas_) b.push_back(&r->backend());
  return b;
}

void Model::each_replica(const std::function<void(size_t)>& work) {
  if (replicas_.size() == 1) return work(0);
  std::vector<std::exception_ptr> errors(replicas_.size());
  auto run = [&](size_t r) {
    try {
      replicas_[r]->backend().bind_thread();
      work(r);
    } catch (...) {
      errors[r] = std::current_exception();
      group_->abort();  // the others may wait for this rank's part of a sum
    }
  };
  std::vector<std::thread> threads;
  for (size_t r = 1; r < replicas_.size(); ++r) threads.emplace_back(run, r);
  run(0);
  for (std::thread& t : threads) t.join();
  // The failure that caused the others (theirs say only that a rank failed).
  std::exception_ptr cause, any;
  for (const std::exception_ptr& e : errors) {
    if (!e) continue;
    if (!any) any = e;
    try {
      std::rethrow_exception(e);
    } catch (const CommAborted&) {
    } catch (...) {
      if (!cause) cause = e;
    }
  }
  if (!any) return;
  group_->recover();
  std::rethrow_exception(cause ? cause : any);
}

void Model::in_turn(const std::function<void(ModelReplica&)>& work) {
  tetra::in_turn(backends(), [&](size_t r) { work(*replicas_[r]); });
}

void Model::release_cache() {
  in_turn([](ModelReplica& r) { r.clear_graphs(); });
  cache_->release_pool();
}

bool Model::has_router_bias(int64_t layer) const { return replicas_.front()->has_router_bias(layer); }

void Model::set_router_bias(int64_t layer, const std::vector<float>& bias) {
  in_turn([&](ModelReplica& r) { r.set_router_bias(layer, bias); });
}

SequenceState Model::new_sequence() const { return SequenceState(cache_); }

const PagedLayout& Model::cache_layout() const { return cache_->layout(); }

void Model::resize(SequenceState& s, int64_t tokens, int64_t room) {
  if (s.cache() != cache_.get()) runtime_error("resize: the sequence does not belong to this model");
  const int32_t slot = s.slot();
  const auto& streams = cache_->layout().streams();
  for (size_t i = 0; i < streams.size(); ++i)
    if (streams[i].layer < config_.n_layers) cache_->reserve(slot, int64_t(i), cache_->layout().rows(streams[i], tokens + room));
  cache_->zero_blocks(slot);
  s.length = tokens;
}

void Model::prepare(const std::vector<SequenceState*>& sequences, const std::vector<std::vector<int32_t>>& tokens,
                    bool already_counted, int64_t begin, int64_t end) {
  if (sequences.size() != tokens.size()) runtime_error("a step needs one token list per sequence");
  const auto& streams = cache_->layout().streams();
  for (size_t s = 0; s < sequences.size(); ++s) {
    SequenceState& seq = *sequences[s];
    if (seq.cache() != cache_.get()) runtime_error("sequence ", s, " does not belong to this model (use new_sequence)");
    if (tokens[s].empty()) runtime_error("sequence ", s, " has no tokens in this step");
    const int64_t start = seq.length - (already_counted ? int64_t(tokens[s].size()) : 0);
    if (start < 0) runtime_error("sequence ", s, " has fewer tokens than the MTP input");
    for (size_t j = 0; j < tokens[s].size(); ++j)
      if (tokens[s][j] < 0 || tokens[s][j] >= config_.vocab_size)
        usage_error("token id ", tokens[s][j], " (sequence ", s, ", position ", start + int64_t(j),
                    ") is outside the vocabulary [0, ", config_.vocab_size, ")");
    const int32_t slot = seq.slot();
    const int64_t length = start + int64_t(tokens[s].size());
    for (size_t i = 0; i < streams.size(); ++i)
      if (streams[i].layer >= begin && streams[i].layer < end)
        cache_->reserve(slot, int64_t(i), cache_->layout().rows(streams[i], length));
  }
}

// Layout: ids, slot, position, start, last, first_row ([rows] each), the entry positions of
// every compress ratio ([rows] each), the embedding copies ([rows·hc]). Rows past the
// sequences' are padding (slot -1).
std::vector<int32_t> Model::step_inputs(const std::vector<SequenceState*>& sequences,
                                        const std::vector<std::vector<int32_t>>& tokens, bool already_counted,
                                        int64_t rows) const {
  const int64_t sections = 6 + int64_t(ratios_.size());
  std::vector<int32_t> v(size_t(rows * (sections + config_.hc_mult)), 0);
  auto at = [&](int64_t section, int64_t row) -> int32_t& { return v[size_t(section * rows + row)]; };
  int64_t row = 0;
  for (size_t s = 0; s < sequences.size(); ++s) {
    const int64_t n = int64_t(tokens[s].size());
    const int64_t start = sequences[s]->length - (already_counted ? n : 0);
    for (int64_t j = 0; j < n; ++j, ++row) {
      const int64_t t = start + j;
      at(0, row) = tokens[s][size_t(j)];
      at(1, row) = sequences[s]->slot();
      at(2, row) = int32_t(t);
      at(3, row) = int32_t(start);
      at(4, row) = int32_t(start + n - 1);
      at(5, row) = int32_t(row - j);
      for (size_t k = 0; k < ratios_.size(); ++k)
        at(6 + int64_t(k), row) = int32_t(std::max<int64_t>(0, ((t + 1) / ratios_[k] - 1) * ratios_[k]));
    }
  }
  for (; row < rows; ++row) {
    at(1, row) = -1;
    at(5, row) = int32_t(row);
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < config_.hc_mult; ++i) v[size_t(sections * rows + r * config_.hc_mult + i)] = int32_t(r);
  return v;
}


Model::StepOutput Model::run_eagerly(const std::vector<int32_t>& inputs, const std::vector<std::vector<int32_t>>& tokens,
                                     int64_t rows, const LogitRows& logit_rows) {
  StepOutput out;
  each_replica([&](size_t r) {
    StepOutput o = replicas_[r]->run(inputs, tokens, rows, logit_rows);
    if (r == 0) out = std::move(o);
  });
  return out;
}

Model::StepOutput Model::step(const std::vector<SequenceState*>& sequences,
                              const std::vector<std::vector<int32_t>>& tokens, const LogitRows& logit_rows) {
  check_logit_rows(logit_rows, tokens);
  prepare(sequences, tokens, false, 0, config_.n_layers);
  int64_t rows = 0;
  for (const auto& t : tokens) rows += int64_t(t.size());
  // Decode steps run as graphs: one token per sequence, or a speculative step's input and draft
  // (the same count for every sequence, every row's logits).
  const int64_t per_sequence = tokens.empty() ? 1 : int64_t(tokens.front().size());
  const bool uniform = std::all_of(tokens.begin(), tokens.end(), [&](const auto& t) { return int64_t(t.size()) == per_sequence; });
  const bool every_row = logit_rows.every || per_sequence == 1 ||
                         (!logit_rows.counts.empty() &&
                          std::all_of(logit_rows.counts.begin(), logit_rows.counts.end(), [&](int64_t n) { return n == per_sequence; }));
  std::optional<StepOutput> out;
  if (uniform && every_row && per_sequence <= kMaxGraphRowsPerSequence && decode_graphs_ && warm_ &&
      !replicas_.front()->observes_routing()) {
    // Buckets of 1, 2, 4, 8, ... sequences: the graph of a bucket serves every batch up to its
    // size with the same tokens per sequence (padding rows take no cache rows).
    int64_t bucket = 1;
    while (bucket < int64_t(sequences.size())) bucket *= 2;
    const std::vector<int32_t> inputs = step_inputs(sequences, tokens, false, bucket * per_sequence);
    bool recorded = true;
    std::optional<StepOutput> first;
    each_replica([&](size_t r) {
      std::optional<StepOutput> o = replicas_[r]->run_graph(inputs, tokens, per_sequence, bucket);
      if (r == 0) {
        recorded = o.has_value();
        first = std::move(o);
      }
    });
    if (recorded) {
      out = std::move(first);
    } else {  // these backends run eagerly only
      decode_graphs_ = false;
      in_turn([](ModelReplica& r) { r.clear_graphs(); });
    }
  }
  if (!out) out = run_eagerly(step_inputs(sequences, tokens, false, rows), tokens, rows, logit_rows);
  warm_ = true;
  for (size_t s = 0; s < sequences.size(); ++s) sequences[s]->length += int64_t(tokens[s].size());
  return std::move(*out);
}

void Model::drop_last_token(SequenceState& s) const {
  if (s.cache() != cache_.get()) runtime_error("drop_last_token: the sequence does not belong to this model");
  if (s.length == 0) runtime_error("drop_last_token: the sequence has no tokens");
  --s.length;
}

Tensor Model::mtp_logits(int64_t k, const std::vector<SequenceState*>& sequences, const Tensor& hidden,
                         const std::vector<std::vector<int32_t>>& next, const LogitRows& logit_rows) {
  const ModelConfig& c = config_;
  if (!has_mtp_ || k < 0 || k >= c.n_mtp_layers) runtime_error("this checkpoint has no MTP block ", k);
  check_logit_rows(logit_rows, next);
  const int64_t layer = c.n_layers + k;
  // The MTP block runs at the positions of the step that produced `hidden`.
  prepare(sequences, next, true, layer, layer + 1);
  int64_t rows = 0;
  for (const auto& t : next) rows += int64_t(t.size());
  if (rows != hidden.rows()) runtime_error("the MTP input has ", rows, " tokens for ", hidden.rows(), " hidden rows");
  const std::vector<int32_t> inputs = step_inputs(sequences, next, true, rows);
  Tensor logits;
  each_replica([&](size_t r) {
    // the ranks' streams are the same bits: rank 0's, copied to each
    const Tensor h = group_ ? group_->broadcast(int(r), hidden) : hidden;
    Tensor l = replicas_[r]->mtp_logits(k, inputs, next, h, logit_rows);
    if (r == 0) logits = std::move(l);
  });
  return logits;
}

}  // namespace tetra
