#include "model/forward.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "model/rope.h"

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

struct Model::Block {
  int64_t ratio = 0;
  bool hash = false;
  Tensor hc_attn_fn, hc_attn_base, hc_attn_scale, hc_ffn_fn, hc_ffn_base, hc_ffn_scale;
  Tensor attn_norm, ffn_norm;
  Tensor wq_a, q_norm, wq_b, wkv, kv_norm, wo_a, wo_b, sinks;
  struct Compressor {
    Tensor wkv, wgate, ape, norm;
  } compressor, index_compressor;
  Tensor index_wq_b, index_weights;
  Tensor gate, gate_bias, tid2eid;
  std::vector<Tensor> w1, w2, w3;
  Tensor shared_w1, shared_w2, shared_w3;
};

struct Model::MtpExtras {
  Tensor e_proj, h_proj, enorm, hnorm, hc_fn, hc_base, hc_scale, norm;
};

// The device inputs of one step: views into one i32 buffer written by a single copy.
struct Model::Batch {
  int64_t rows = 0;
  std::vector<int64_t> runs;  // rows per sequence (padding rows: one each), for RowRuns
  Tensor ids;
  StepRows at;
  std::map<int64_t, Tensor> entry_position;  // per compress ratio: the rope position of the entry a row completes
  Tensor copies;                              // [rows·hc]: the row of each embedding copy
};

struct Model::DecodeGraph {
  Tensor inputs, logits, hidden;  // fixed buffers the graph reads and writes
  std::unique_ptr<DeviceGraph> graph;
  uint64_t generation = 0;  // of the cache whose addresses it holds
};

Model::Model(const ModelConfig& config, const ModelWeights& w, Backend& backend, CacheTypes caches)
    : config_(config), be_(backend), caches_(caches) {
  const ModelConfig& c = config_;
  auto P = [&](const std::string& role) { return be_.load_param(w.param(role)); };
  auto L = [&](const std::string& role) { return be_.load_linear(w.linear(role)); };
  embed_ = P("embed.weight");
  head_ = w.has_linear("head") ? L("head") : embed_;
  norm_ = P("norm.weight");
  hc_head_fn_ = P("hc_head_fn");
  hc_head_base_ = P("hc_head_base");
  hc_head_scale_ = P("hc_head_scale");
  inv_freq_main_ = be_.upload(rope_inv_freq(c, false), {c.rope_dim / 2});
  inv_freq_compressed_ = be_.upload(rope_inv_freq(c, true), {c.rope_dim / 2});

  const int64_t n_mtp = w.has_mtp() ? c.n_mtp_layers : 0;
  cache_ = std::make_shared<PagedCache>(backend, PagedLayout(c, caches.kv, caches.indexer, c.n_layers + n_mtp));
  for (int64_t r : c.compress_ratios)
    if (r > 0 && std::find(ratios_.begin(), ratios_.end(), r) == ratios_.end()) ratios_.push_back(r);
  for (int64_t i = 0; i < c.n_layers + n_mtp; ++i) {
    const bool is_mtp = i >= c.n_layers;
    const std::string p = is_mtp ? "mtp." + std::to_string(i - c.n_layers) : "layers." + std::to_string(i);
    auto b = std::make_unique<Block>();
    b->ratio = is_mtp ? 0 : c.compress_ratios[size_t(i)];
    b->hash = !is_mtp && c.hash_routed[size_t(i)];
    b->hc_attn_fn = P(p + ".hc_attn_fn");
    b->hc_attn_base = P(p + ".hc_attn_base");
    b->hc_attn_scale = P(p + ".hc_attn_scale");
    b->hc_ffn_fn = P(p + ".hc_ffn_fn");
    b->hc_ffn_base = P(p + ".hc_ffn_base");
    b->hc_ffn_scale = P(p + ".hc_ffn_scale");
    b->attn_norm = P(p + ".attn_norm.weight");
    b->ffn_norm = P(p + ".ffn_norm.weight");
    const std::string a = p + ".attn.";
    b->wq_a = L(a + "wq_a");
    b->q_norm = P(a + "q_norm.weight");
    b->wq_b = L(a + "wq_b");
    b->wkv = L(a + "wkv");
    b->kv_norm = P(a + "kv_norm.weight");
    b->wo_a = L(a + "wo_a");
    b->wo_b = L(a + "wo_b");
    b->sinks = P(a + "attn_sink");
    auto compressor = [&](const std::string& q) {
      return Block::Compressor{L(q + "wkv"), L(q + "wgate"), P(q + "ape"), P(q + "norm.weight")};
    };
    if (b->ratio > 0) b->compressor = compressor(a + "compressor.");
    if (b->ratio == 4) {
      b->index_compressor = compressor(a + "indexer.compressor.");
      b->index_wq_b = L(a + "indexer.wq_b");
      b->index_weights = L(a + "indexer.weights_proj");
    }
    const std::string f = p + ".ffn.";
    b->gate = L(f + "gate");
    if (b->hash) b->tid2eid = P(f + "gate.tid2eid");
    if (w.has_param(f + "gate.bias")) b->gate_bias = P(f + "gate.bias");
    for (int64_t e = 0; e < c.n_routed_experts; ++e) {
      const std::string x = f + "experts." + std::to_string(e) + ".";
      b->w1.push_back(L(x + "w1"));
      b->w2.push_back(L(x + "w2"));
      b->w3.push_back(L(x + "w3"));
    }
    if (c.n_shared_experts > 0) {
      b->shared_w1 = L(f + "shared_experts.w1");
      b->shared_w2 = L(f + "shared_experts.w2");
      b->shared_w3 = L(f + "shared_experts.w3");
    }
    blocks_.push_back(std::move(b));
    if (is_mtp) {
      auto m = std::make_unique<MtpExtras>();
      m->e_proj = L(p + ".e_proj");
      m->h_proj = L(p + ".h_proj");
      m->enorm = P(p + ".enorm.weight");
      m->hnorm = P(p + ".hnorm.weight");
      m->hc_fn = P(p + ".hc_head_fn");
      m->hc_base = P(p + ".hc_head_base");
      m->hc_scale = P(p + ".hc_head_scale");
      m->norm = P(p + ".norm.weight");
      mtp_.push_back(std::move(m));
    }
  }
}

Model::~Model() = default;

void Model::release_cache() {
  graphs_.clear();
  cache_->release_pool();
}

bool Model::has_router_bias(int64_t layer) const {
  return layer >= 0 && layer < config_.n_layers && !blocks_[size_t(layer)]->gate_bias.empty();
}

void Model::set_router_bias(int64_t layer, const std::vector<float>& bias) {
  if (!has_router_bias(layer)) runtime_error("set_router_bias: layer ", layer, " has no router bias");
  if (int64_t(bias.size()) != config_.n_routed_experts)
    runtime_error("set_router_bias: ", bias.size(), " values for ", config_.n_routed_experts, " experts");
  blocks_[size_t(layer)]->gate_bias = be_.upload(bias, {config_.n_routed_experts});
  graphs_.clear();  // they hold the old bias's address
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

Model::Batch Model::batch_views(const Tensor& inputs, const std::vector<std::vector<int32_t>>& tokens, int64_t rows) const {
  Batch b;
  b.rows = rows;
  int64_t used = 0;
  for (const auto& t : tokens) used += b.runs.emplace_back(int64_t(t.size()));
  for (; used < rows; ++used) b.runs.push_back(1);
  auto section = [&](int64_t k) { return inputs.rows_view(k * rows, rows); };
  b.ids = section(0);
  b.at = {section(1), section(2), section(3), section(4), section(5)};
  for (size_t k = 0; k < ratios_.size(); ++k) b.entry_position[ratios_[k]] = section(6 + int64_t(k));
  b.copies = inputs.rows_view((6 + int64_t(ratios_.size())) * rows, rows * config_.hc_mult);
  return b;
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
  StepOutput out;
  if (uniform && every_row && per_sequence <= kMaxGraphRowsPerSequence && decode_graphs_ && warm_ && !routing_observer_) {
    out = decode_with_graph(sequences, tokens, per_sequence);
  } else {
    const std::vector<int32_t> inputs = step_inputs(sequences, tokens, false, rows);
    out = forward(batch_views(be_.upload_i32(inputs, {int64_t(inputs.size())}), tokens, rows), logit_rows);
  }
  warm_ = true;
  for (size_t s = 0; s < sequences.size(); ++s) sequences[s]->length += int64_t(tokens[s].size());
  return out;
}

void Model::drop_last_token(SequenceState& s) const {
  if (s.cache() != cache_.get()) runtime_error("drop_last_token: the sequence does not belong to this model");
  if (s.length == 0) runtime_error("drop_last_token: the sequence has no tokens");
  --s.length;
}

// Buckets of 1, 2, 4, 8, ... sequences: the graph of a bucket serves every batch up to its size
// with the same tokens per sequence (padding rows take no cache rows).
Model::StepOutput Model::decode_with_graph(const std::vector<SequenceState*>& sequences,
                                           const std::vector<std::vector<int32_t>>& tokens, int64_t per_sequence) {
  const int64_t n = int64_t(sequences.size());
  int64_t bucket = 1;
  while (bucket < n) bucket *= 2;
  const int64_t rows = bucket * per_sequence;
  const std::vector<int32_t> inputs = step_inputs(sequences, tokens, false, rows);
  std::unique_ptr<DecodeGraph>& g = graphs_[{per_sequence, bucket}];
  if (!g) {
    g = std::make_unique<DecodeGraph>();
    g->inputs = be_.zeros({int64_t(inputs.size())}, ElemType::i32);
    g->logits = be_.zeros({rows, config_.vocab_size}, ElemType::f32);
    g->hidden = be_.zeros({rows, config_.hc_mult * config_.dim}, ElemType::f32);
  }
  if (!g->graph || g->generation != cache_->generation()) {
    g->graph = be_.capture([&] {
      const StepOutput o = forward(batch_views(g->inputs, tokens, rows), LogitRows::every_token());
      be_.copy_into(g->logits, o.logits);
      be_.copy_into(g->hidden, o.hidden);
    });
    g->generation = cache_->generation();
  }
  if (!g->graph) {  // this backend runs eagerly only
    decode_graphs_ = false;
    graphs_.clear();
    const std::vector<int32_t> unpadded = step_inputs(sequences, tokens, false, n * per_sequence);
    return forward(batch_views(be_.upload_i32(unpadded, {int64_t(unpadded.size())}), tokens, n * per_sequence),
                   LogitRows::every_token());
  }
  be_.write_i32(g->inputs, 0, inputs);
  g->graph->launch();
  return {be_.slice_rows(g->logits, 0, n * per_sequence), be_.slice_rows(g->hidden, 0, n * per_sequence)};
}

Model::StepOutput Model::forward(const Batch& batch, const LogitRows& logit_rows) {
  const ModelConfig& c = config_;
  // h: hc_mult copies of the embedding per token
  Tensor h = be_.embed(be_.embed(embed_, batch.ids), batch.copies).view({batch.rows, c.hc_mult * c.dim});
  if (c.n_layers > 0) {
    Streams s = entering(*blocks_[0], std::move(h));
    for (int64_t i = 0; i < c.n_layers; ++i)
      s = block_forward(*blocks_[size_t(i)], i, s, i + 1 < c.n_layers ? blocks_[size_t(i + 1)].get() : nullptr, batch);
    h = std::move(s.h);
  }
  return {head_logits(h, hc_head_fn_, hc_head_base_, hc_head_scale_, norm_, batch, logit_rows), h};
}

Tensor Model::head_logits(const Tensor& h, const Tensor& fn, const Tensor& base, const Tensor& scale,
                          const Tensor& norm, const Batch& batch, const LogitRows& logit_rows) {
  auto head = [&](const Tensor& rows, RowRuns runs) {
    return be_.linear(be_.hc_head(rows, fn, base, scale, norm, config_), head_, runs);
  };
  if (logit_rows.every) return head(h, batch.runs);
  // The picked rows alone through the head (a row's logits do not depend on its neighbours).
  std::vector<int32_t> picked;
  std::vector<int64_t> counts;
  int64_t end = 0;
  for (size_t i = 0; i < batch.runs.size(); ++i) {
    end += batch.runs[i];
    const int64_t count = logit_rows.counts.empty() ? 1 : logit_rows.counts[i];
    for (int64_t r = end - count; r < end; ++r) picked.push_back(int32_t(r));
    counts.push_back(count);
  }
  if (int64_t(picked.size()) == batch.rows) return head(h, batch.runs);
  return head(be_.embed(h, be_.upload_i32(picked, {int64_t(picked.size())})), counts);
}

Streams Model::entering(const Block& b, Tensor h) {
  MixWeights mix = be_.hc_pre(h, b.hc_attn_fn, b.hc_attn_base, b.hc_attn_scale, b.attn_norm, config_);
  return {std::move(h), std::move(mix)};
}

Streams Model::block_forward(const Block& b, int64_t layer, const Streams& s, const Block* next, const Batch& batch) {
  const Streams f = be_.hc_post_pre(s.h, attention(b, layer, s.mix.x, batch), nullptr, s.mix.post, s.mix.comb,
                                    b.hc_ffn_fn, b.hc_ffn_base, b.hc_ffn_scale, b.ffn_norm, config_);
  const MoeOutput y = moe(b, layer, f.mix.x, batch);
  const Tensor* shared = y.shared.empty() ? nullptr : &y.shared;
  if (!next) return {be_.hc_post(f.h, y.routed, shared, f.mix.post, f.mix.comb), {}};
  return be_.hc_post_pre(f.h, y.routed, shared, f.mix.post, f.mix.comb, next->hc_attn_fn, next->hc_attn_base,
                         next->hc_attn_scale, next->attn_norm, config_);
}

namespace {

// A weight and where its product goes.
struct Projection {
  const Tensor* weight;
  Tensor* out;
};
// out = x·weightᵀ for each projection, in one backend call: a backend may run linears that
// share their input in one launch.
void project(Backend& be, const Tensor& x, const std::vector<Projection>& projections, RowRuns runs) {
  std::vector<const Tensor*> weights;
  for (const Projection& p : projections) weights.push_back(p.weight);
  std::vector<Tensor> products = be.linears(x, weights, runs);
  for (size_t i = 0; i < projections.size(); ++i) *projections[i].out = std::move(products[i]);
}

}  // namespace

Tensor Model::attention(const Block& b, int64_t layer, const Tensor& x, const Batch& batch) {
  const ModelConfig& c = config_;
  const int64_t hd = c.head_dim;
  const Tensor& inv_freq = b.ratio > 0 ? inv_freq_compressed_ : inv_freq_main_;
  // x's projections: q's and kv's first; the compressors' (compressed layers) and the indexer's
  // head weights (CSA) on the branch that consumes them, so that qr's norm does not wait for them
  // (a backend runs a set of one format in one launch, and one launch after another).
  struct CompressorInputs {
    Tensor kv, gate;
  } main_in, index_in;
  Tensor q_a, kv_a, index_head_weights, q_b, index_q;
  project(be_, x, {{&b.wq_a, &q_a}, {&b.wkv, &kv_a}}, batch.runs);
  auto project_compressors = [&] {
    std::vector<Projection> from_x{{&b.compressor.wkv, &main_in.kv}, {&b.compressor.wgate, &main_in.gate}};
    if (b.ratio == 4)
      from_x.insert(from_x.end(), {{&b.index_compressor.wkv, &index_in.kv},
                                   {&b.index_compressor.wgate, &index_in.gate},
                                   {&b.index_weights, &index_head_weights}});
    project(be_, x, from_x, batch.runs);
  };
  // qr's projections: q's heads and (CSA) the indexer's queries.
  auto project_qr = [&] {
    const Tensor qr = be_.rms_norm(q_a, &b.q_norm, c.q_lora_rank, c.norm_eps);
    std::vector<Projection> from_qr{{&b.wq_b, &q_b}};
    if (b.ratio == 4) from_qr.push_back({&b.index_wq_b, &index_q});
    project(be_, qr, from_qr, batch.runs);
  };
  auto paged = [&](StreamKind kind) { return cache_->rows(cache_->layout().stream(layer, kind)); };
  // The query, and the step's key as the cache stores it: every use, the producing step's
  // included, sees the stored values.
  Tensor q, kv_stored;
  auto queries = [&] {
    std::vector<Tensor> q_kv =
        be_.rms_norm_ropes({{&q_b, nullptr}, {&kv_a, &b.kv_norm}}, hd, c.norm_eps, batch.at.position, inv_freq);
    q = std::move(q_kv[0]);
    kv_stored = be_.encode_kv(q_kv[1], caches_.kv, c.rope_dim);
  };
  // The entries of the windows this step's tokens complete (zero rows elsewhere), normalized
  // and rotated to their window's first position.
  auto entries = [&](const Block::Compressor& w, const CompressorInputs& in, StreamKind pending, bool overlap) {
    const Tensor pooled = be_.compress(paged(pending), in.kv, in.gate, w.ape, batch.at, b.ratio, overlap, batch.runs);
    const int64_t width = pooled.dim(1);
    return be_.rms_norm_rope(pooled, &w.norm, width, c.norm_eps, batch.entry_position.at(b.ratio),
                             inv_freq_compressed_);
  };
  const RowPlacement completed{0, b.ratio};
  PagedRows compressed;
  Tensor step_entries;  // as stored: attention may read the step's own entries here
  auto store_compressed = [&] {
    compressed = paged(StreamKind::compressed);
    step_entries = be_.encode_kv(entries(b.compressor, main_in, StreamKind::compressor_pending, b.ratio == 4),
                                 caches_.kv, c.rope_dim);
    be_.store_rows(compressed, step_entries, batch.at, completed);
    main_in = {};  // its memory back before attention (a prefill's are tens of MB)
  };
  // CSA: the indexer's keys of this step stored, then its top-k compressed entries per query.
  const PagedRows keys = b.ratio == 4 ? paged(StreamKind::indexer_keys) : PagedRows{};
  auto store_index_keys = [&] {
    be_.store_rows(
        keys,
        be_.encode_indexer(entries(b.index_compressor, index_in, StreamKind::indexer_pending, true), caches_.indexer),
        batch.at, completed);
    index_in = {};
  };
  Tensor selected;
  auto select = [&] {
    const int64_t ihd = c.index_head_dim, ih = c.index_n_heads;
    const Tensor qi = be_.rope_indexer_query(index_q, batch.at.position, inv_freq_compressed_, caches_.indexer, ihd);
    selected = be_.indexer_topk(qi, index_head_weights, keys, caches_.indexer, batch.at, ih, c.index_topk, b.ratio,
                                1.0 / std::sqrt(double(ihd)) / std::sqrt(double(ih)));
  };
  // The compressors need only x: their projections and chains of small kernels run beside the
  // query's path (in CSA the indexer's keys beside qr's projections, then the queries and the
  // main compressor beside the indexer's top-k).
  if (b.ratio == 4) {
    be_.concurrently([&] { project_compressors(); store_index_keys(); }, project_qr);
    be_.concurrently([&] { queries(); store_compressed(); }, select);
  } else if (b.ratio > 0) {
    be_.concurrently([&] { project_compressors(); store_compressed(); }, [&] { project_qr(); queries(); });
  } else {
    project_qr();
    queries();
  }

  const PagedRows window = paged(StreamKind::window);
  // the output comes rotated back (inverse rope), ready for wo_a
  const AttentionShape shape{caches_.kv, hd, c.rope_dim, c.window, b.ratio, 1.0 / std::sqrt(double(hd)), &inv_freq};
  const Tensor o = be_.attention(q, kv_stored, window, b.ratio > 0 ? &compressed : nullptr,
                                 step_entries.empty() ? nullptr : &step_entries, selected.empty() ? nullptr : &selected,
                                 b.sinks, batch.at, shape, batch.runs);
  // The step's keys into the window ring after attention (it read the ring's older rows), beside
  // the output projection.
  Tensor out;
  be_.concurrently([&] { be_.store_rows(window, kv_stored, batch.at, {c.window, 0}); },
                   [&] { out = be_.linear(be_.grouped_linear(o, b.wo_a, c.o_groups, batch.runs), b.wo_b, batch.runs); });
  return out;
}

Model::MoeOutput Model::moe(const Block& b, int64_t layer, const Tensor& x, const Batch& batch) {
  const ModelConfig& c = config_;
  Tensor routed, shared;
  const Routing r = be_.route(be_.linear(x, b.gate, batch.runs), b.gate_bias.empty() ? nullptr : &b.gate_bias,
                              b.hash ? &b.tid2eid : nullptr, batch.ids, c);
  if (routing_observer_ && layer < c.n_layers) routing_observer_(layer, r.experts);
  auto run_routed = [&] { routed = be_.experts(x, r, b.w1, b.w2, b.w3, c.swiglu_limit, batch.runs); };
  if (c.n_shared_experts == 0) {
    run_routed();
    return {routed, {}};
  }
  // The shared expert beside the routed experts, after the router: beside the router, its
  // streaming loads slowed the router's short chain of dependent ones (a decode step's timeline
  // on the H200: the router ended ~7 us after the gate, with the shared expert running).
  be_.concurrently(
      [&] {
        shared = be_.linear(be_.gated_linear(x, b.shared_w1, b.shared_w3, c.swiglu_limit, batch.runs), b.shared_w2,
                            batch.runs);
      },
      run_routed);
  return {routed, shared};
}

Tensor Model::mtp_logits(int64_t k, const std::vector<SequenceState*>& sequences, const Tensor& hidden,
                         const std::vector<std::vector<int32_t>>& next, const LogitRows& logit_rows) {
  const ModelConfig& c = config_;
  if (k < 0 || k >= int64_t(mtp_.size())) runtime_error("this checkpoint has no MTP block ", k);
  check_logit_rows(logit_rows, next);
  const int64_t layer = c.n_layers + k;
  // The MTP block runs at the positions of the step that produced `hidden`.
  prepare(sequences, next, true, layer, layer + 1);
  int64_t rows = 0;
  for (const auto& t : next) rows += int64_t(t.size());
  if (rows != hidden.rows()) runtime_error("the MTP input has ", rows, " tokens for ", hidden.rows(), " hidden rows");
  const std::vector<int32_t> inputs = step_inputs(sequences, next, true, rows);
  const Batch batch = batch_views(be_.upload_i32(inputs, {int64_t(inputs.size())}), next, rows);
  const MtpExtras& m = *mtp_[size_t(k)];
  const Tensor e = be_.linear(be_.rms_norm(be_.embed(embed_, batch.ids), &m.enorm, c.dim, c.norm_eps), m.e_proj, batch.runs);
  std::vector<int64_t> hc_runs;  // h_proj reads hc_mult rows per token
  for (const int64_t n : batch.runs) hc_runs.push_back(n * c.hc_mult);
  const Tensor hn = be_.rms_norm(hidden.view({batch.rows * c.hc_mult, c.dim}), &m.hnorm, c.dim, c.norm_eps);
  Tensor h = be_.add(be_.embed(e, batch.copies), be_.linear(hn, m.h_proj, hc_runs)).view({batch.rows, c.hc_mult * c.dim});
  const Block& b = *blocks_[size_t(layer)];
  h = block_forward(b, layer, entering(b, std::move(h)), nullptr, batch).h;
  return head_logits(h, m.hc_fn, m.hc_base, m.hc_scale, m.norm, batch, logit_rows);
}

}  // namespace tetra
