#include "model/replica.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "model/rope.h"

namespace tetra {

std::vector<int64_t> distinct_compress_ratios(const ModelConfig& c) {
  std::vector<int64_t> ratios;
  for (int64_t r : c.compress_ratios)
    if (r > 0 && std::find(ratios.begin(), ratios.end(), r) == ratios.end()) ratios.push_back(r);
  return ratios;
}

struct ModelReplica::Block {
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

struct ModelReplica::MtpExtras {
  Tensor e_proj, h_proj, enorm, hnorm, hc_fn, hc_base, hc_scale, norm;
};

// The device inputs of one step: views into one i32 buffer written by a single copy.
struct ModelReplica::Batch {
  int64_t rows = 0;
  std::vector<int64_t> runs;  // rows per sequence (padding rows: one each), for RowRuns
  Tensor ids;
  StepRows at;
  std::map<int64_t, Tensor> entry_position;  // per compress ratio: the rope position of the entry a row completes
  Tensor copies;                              // [rows·hc]: the row of each embedding copy
};

struct ModelReplica::DecodeGraph {
  Tensor inputs, logits, hidden;  // fixed buffers the graph reads and writes
  std::unique_ptr<DeviceGraph> graph;
  uint64_t generation = 0;  // of the cache whose addresses it holds
};

ModelReplica::ModelReplica(const ModelConfig& config, const ModelWeights& w, Backend& backend, CacheTypes caches,
                           std::shared_ptr<PagedCache> cache, size_t cache_copy, ExpertShard shard)
    : config_(config),
      be_(backend),
      caches_(caches),
      cache_(std::move(cache)),
      cache_copy_(cache_copy),
      shard_(shard),
      ratios_(distinct_compress_ratios(config)) {
  if (shard_.ranks > 1 && !shard_.group) runtime_error("a replica of rank ", shard_.rank, " of ", shard_.ranks, " needs its group");
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
    b->w1.resize(size_t(c.n_routed_experts));
    b->w2.resize(size_t(c.n_routed_experts));
    b->w3.resize(size_t(c.n_routed_experts));
    for (int64_t e = 0; e < c.n_routed_experts; ++e) {
      if (!shard_.holds(e, c.n_routed_experts)) continue;  // another rank's: empty here
      const std::string x = f + "experts." + std::to_string(e) + ".";
      b->w1[size_t(e)] = L(x + "w1");
      b->w2[size_t(e)] = L(x + "w2");
      b->w3[size_t(e)] = L(x + "w3");
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

ModelReplica::~ModelReplica() = default;

void ModelReplica::clear_graphs() { graphs_.clear(); }

bool ModelReplica::has_router_bias(int64_t layer) const {
  return layer >= 0 && layer < config_.n_layers && !blocks_[size_t(layer)]->gate_bias.empty();
}

void ModelReplica::set_router_bias(int64_t layer, const std::vector<float>& bias) {
  if (!has_router_bias(layer)) runtime_error("set_router_bias: layer ", layer, " has no router bias");
  if (int64_t(bias.size()) != config_.n_routed_experts)
    runtime_error("set_router_bias: ", bias.size(), " values for ", config_.n_routed_experts, " experts");
  blocks_[size_t(layer)]->gate_bias = be_.upload(bias, {config_.n_routed_experts});
  graphs_.clear();  // they hold the old bias's address
}

StepOutput ModelReplica::run(const std::vector<int32_t>& inputs, const std::vector<std::vector<int32_t>>& tokens,
                              int64_t rows, const LogitRows& logit_rows) {
  return forward(batch_views(be_.upload_i32(inputs, {int64_t(inputs.size())}), tokens, rows), logit_rows);
}

std::optional<StepOutput> ModelReplica::run_graph(const std::vector<int32_t>& inputs,
                                                  const std::vector<std::vector<int32_t>>& tokens, int64_t per_sequence,
                                                  int64_t bucket) {
  const int64_t rows = bucket * per_sequence, n = int64_t(tokens.size()) * per_sequence;
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
    graphs_.clear();
    return std::nullopt;
  }
  be_.write_i32(g->inputs, 0, inputs);
  g->graph->launch();
  return StepOutput{be_.slice_rows(g->logits, 0, n), be_.slice_rows(g->hidden, 0, n)};
}

ModelReplica::Batch ModelReplica::batch_views(const Tensor& inputs, const std::vector<std::vector<int32_t>>& tokens, int64_t rows) const {
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

StepOutput ModelReplica::forward(const Batch& batch, const LogitRows& logit_rows) {
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

Tensor ModelReplica::head_logits(const Tensor& h, const Tensor& fn, const Tensor& base, const Tensor& scale,
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

Streams ModelReplica::entering(const Block& b, Tensor h) {
  MixWeights mix = be_.hc_pre(h, b.hc_attn_fn, b.hc_attn_base, b.hc_attn_scale, b.attn_norm, config_);
  return {std::move(h), std::move(mix)};
}

Streams ModelReplica::block_forward(const Block& b, int64_t layer, const Streams& s, const Block* next, const Batch& batch) {
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

Tensor ModelReplica::attention(const Block& b, int64_t layer, const Tensor& x, const Batch& batch) {
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
  auto paged = [&](StreamKind kind) { return cache_->rows(cache_->layout().stream(layer, kind), cache_copy_); };
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

ModelReplica::MoeOutput ModelReplica::moe(const Block& b, int64_t layer, const Tensor& x, const Batch& batch) {
  const ModelConfig& c = config_;
  Tensor routed, shared;
  const Routing r = be_.route(be_.linear(x, b.gate, batch.runs), b.gate_bias.empty() ? nullptr : &b.gate_bias,
                              b.hash ? &b.tid2eid : nullptr, batch.ids, c);
  if (routing_observer_ && layer < c.n_layers) routing_observer_(layer, r.experts);
  auto run_routed = [&] { routed = routed_experts(b, x, r, batch); };
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

Tensor ModelReplica::routed_experts(const Block& b, const Tensor& x, const Routing& r, const Batch& batch) {
  const double limit = config_.swiglu_limit;
  if (shard_.ranks == 1) return be_.experts(x, r, b.w1, b.w2, b.w3, limit, batch.runs);
  // Each (row, slot) is one expert's, so one rank's value and zeros elsewhere: the sum over ranks
  // is that value exactly, and the slots then combine as on one rank.
  Tensor slots = be_.expert_slots(x, r, b.w1, b.w2, b.w3, limit, batch.runs);
  shard_.group->all_reduce_sum(shard_.rank, slots);
  return be_.combine_slots(slots, r);
}

Tensor ModelReplica::mtp_logits(int64_t k, const std::vector<int32_t>& inputs,
                               const std::vector<std::vector<int32_t>>& next, const Tensor& hidden,
                               const LogitRows& logit_rows) {
  const ModelConfig& c = config_;
  if (k < 0 || k >= int64_t(mtp_.size())) runtime_error("this checkpoint has no MTP block ", k);
  const int64_t layer = c.n_layers + k;
  const Batch batch = batch_views(be_.upload_i32(inputs, {int64_t(inputs.size())}), next, hidden.rows());
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
