#include "model/forward.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/rope.h"

namespace tetra {

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

// Row bookkeeping of one step: which rows belong to which sequence, at which positions.
struct Model::Batch {
  std::vector<int64_t> first_row, count, start;  // per sequence
  Tensor ids, positions;                          // per row
  int64_t rows = 0;
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

SequenceState Model::new_sequence() const {
  SequenceState s;
  s.layers.resize(blocks_.size());
  return s;
}

Model::Batch Model::make_batch(const std::vector<SequenceState*>& sequences,
                               const std::vector<std::vector<int32_t>>& tokens, bool already_counted) const {
  if (sequences.size() != tokens.size()) runtime_error("a step needs one token list per sequence");
  Batch b;
  std::vector<int32_t> ids, positions;
  for (size_t s = 0; s < sequences.size(); ++s) {
    if (tokens[s].empty()) runtime_error("sequence ", s, " has no tokens in this step");
    b.first_row.push_back(b.rows);
    b.count.push_back(int64_t(tokens[s].size()));
    const int64_t start = sequences[s]->length - (already_counted ? int64_t(tokens[s].size()) : 0);
    if (start < 0) runtime_error("sequence ", s, " has fewer tokens than the MTP input");
    b.start.push_back(start);
    for (size_t j = 0; j < tokens[s].size(); ++j) {
      const int32_t id = tokens[s][j];
      if (id < 0 || id >= config_.vocab_size)
        usage_error("token id ", id, " (sequence ", s, ", position ", start + int64_t(j),
                    ") is outside the vocabulary [0, ", config_.vocab_size, ")");
      ids.push_back(id);
      positions.push_back(int32_t(start + int64_t(j)));
    }
    b.rows += int64_t(tokens[s].size());
  }
  b.ids = be_.upload_i32(ids, {b.rows});
  b.positions = be_.upload_i32(positions, {b.rows});
  return b;
}

Model::StepOutput Model::step(const std::vector<SequenceState*>& sequences,
                              const std::vector<std::vector<int32_t>>& tokens) {
  const ModelConfig& c = config_;
  const Batch batch = make_batch(sequences, tokens, false);
  // h: hc_mult copies of the embedding per token
  std::vector<int32_t> copies;
  for (int64_t r = 0; r < batch.rows; ++r)
    for (int64_t i = 0; i < c.hc_mult; ++i) copies.push_back(int32_t(r));
  Tensor h = be_.embed(be_.embed(embed_, batch.ids), be_.upload_i32(copies, {batch.rows * c.hc_mult}))
                 .view({batch.rows, c.hc_mult * c.dim});
  for (int64_t i = 0; i < c.n_layers; ++i) h = block_forward(*blocks_[size_t(i)], i, h, batch, sequences);
  for (size_t s = 0; s < sequences.size(); ++s) sequences[s]->length += batch.count[s];
  return {head_logits(h, hc_head_fn_, hc_head_base_, hc_head_scale_, norm_), h};
}

Tensor Model::head_logits(const Tensor& h, const Tensor& fn, const Tensor& base, const Tensor& scale,
                          const Tensor& norm) {
  const Tensor x = be_.rms_norm(be_.hc_head(h, fn, base, scale, config_), &norm, config_.dim, config_.norm_eps);
  return be_.linear(x, head_);
}

Tensor Model::block_forward(const Block& b, int64_t layer, Tensor h, const Batch& batch,
                            const std::vector<SequenceState*>& sequences) {
  MixWeights m = be_.hc_pre(h, b.hc_attn_fn, b.hc_attn_base, b.hc_attn_scale, config_);
  h = be_.hc_post(h, attention(b, layer, m.x, batch, sequences), m.post, m.comb);
  m = be_.hc_pre(h, b.hc_ffn_fn, b.hc_ffn_base, b.hc_ffn_scale, config_);
  return be_.hc_post(h, moe(b, m.x, batch), m.post, m.comb);
}

Tensor Model::attention(const Block& b, int64_t layer, const Tensor& x_in, const Batch& batch,
                        const std::vector<SequenceState*>& sequences) {
  const ModelConfig& c = config_;
  const int64_t hd = c.head_dim, W = c.window, n_seq = int64_t(sequences.size());
  const Tensor& inv_freq = b.ratio > 0 ? inv_freq_compressed_ : inv_freq_main_;
  const Tensor x = be_.rms_norm(x_in, &b.attn_norm, c.dim, c.norm_eps);
  const Tensor qr = be_.rms_norm(be_.linear(x, b.wq_a), &b.q_norm, c.q_lora_rank, c.norm_eps);
  Tensor q = be_.rms_norm(be_.linear(qr, b.wq_b), nullptr, hd, c.norm_eps);
  be_.rope(q, batch.positions, inv_freq, hd, false);
  Tensor kv = be_.rms_norm(be_.linear(x, b.wkv), &b.kv_norm, hd, c.norm_eps);
  be_.rope(kv, batch.positions, inv_freq, hd, false);
  // Every use, the producing step's included, sees the values as the cache stores them.
  const Tensor kv_stored = be_.encode_kv(kv, caches_.kv, c.rope_dim);
  const Tensor kv_seen = be_.decode_kv(kv_stored, caches_.kv, hd, c.rope_dim);

  // Compressed entries of the windows this step completes.
  auto run_compressor = [&](const Block::Compressor& w, int64_t width, bool overlap, int64_t s, bool indexer) {
    const Tensor a = be_.linear(x, w.wkv), z = be_.linear(x, w.wgate);
    LayerState& st = sequences[size_t(s)]->layers[size_t(layer)];
    CompressorState& cs = indexer ? st.indexer : st.compressor;
    const int64_t before = cs.windows;
    Tensor pooled = be_.compress(cs, be_.slice_rows(a, batch.first_row[size_t(s)], batch.count[size_t(s)]),
                                 be_.slice_rows(z, batch.first_row[size_t(s)], batch.count[size_t(s)]), w.ape,
                                 batch.start[size_t(s)], b.ratio, overlap);
    if (pooled.rows() == 0) return;
    const int64_t out_w = overlap ? width / 2 : width;
    Tensor entries = be_.rms_norm(pooled, &w.norm, out_w, c.norm_eps);
    std::vector<int32_t> pos;
    for (int64_t k = 0; k < pooled.rows(); ++k) pos.push_back(int32_t((before + k) * b.ratio));
    be_.rope(entries, be_.upload_i32(pos, {pooled.rows()}), inv_freq_compressed_, out_w, false);
    if (indexer) {
      const Tensor enc = be_.encode_indexer(entries, caches_.indexer);
      st.indexer_keys = be_.concat_rows({st.indexer_keys, enc}, {enc.row_numel()}, enc.type());
    } else {
      const Tensor enc = be_.encode_kv(entries, caches_.kv, c.rope_dim);
      st.compressed = be_.concat_rows({st.compressed, enc}, {enc.row_numel()}, enc.type());
    }
  };
  const bool overlap = b.ratio == 4;
  for (int64_t s = 0; s < n_seq && b.ratio > 0; ++s) {
    run_compressor(b.compressor, b.compressor.wkv.dim(0), overlap, s, false);
    if (overlap) run_compressor(b.index_compressor, b.index_compressor.wkv.dim(0), true, s, true);
  }

  // Indexer: top-k compressed entries per query (CSA).
  std::vector<int32_t> selected;
  int64_t topk = 0;
  if (b.ratio == 4) {
    const int64_t ihd = c.index_head_dim, ih = c.index_n_heads;
    Tensor qi = be_.linear(qr, b.index_wq_b);
    be_.rope(qi, batch.positions, inv_freq_compressed_, ihd, false);
    qi = be_.indexer_query(qi, caches_.indexer, ihd);
    const Tensor wi = be_.linear(x, b.index_weights);
    std::vector<Tensor> keys;
    std::vector<int32_t> key_begin, visible, available;
    int64_t offset = 0;
    for (int64_t s = 0; s < n_seq; ++s) {
      const LayerState& st = sequences[size_t(s)]->layers[size_t(layer)];
      const int64_t entries = st.indexer_keys.empty() ? 0 : st.indexer_keys.rows();
      if (entries) keys.push_back(be_.decode_indexer(st.indexer_keys, caches_.indexer, ihd));
      for (int64_t j = 0; j < batch.count[size_t(s)]; ++j) {
        key_begin.push_back(int32_t(offset));
        visible.push_back(int32_t(std::min(entries, (batch.start[size_t(s)] + j + 1) / b.ratio)));
        available.push_back(int32_t(entries));
      }
      offset += entries;
    }
    topk = c.index_topk;
    const Tensor idx = be_.indexer_topk(qi, wi, be_.concat_rows(keys, {ihd}, ElemType::f32),
                                        be_.upload_i32(key_begin, {batch.rows}), be_.upload_i32(visible, {batch.rows}),
                                        be_.upload_i32(available, {batch.rows}), ih, topk, 1.0 / std::sqrt(double(ihd)) / std::sqrt(double(ih)));
    selected = be_.download_i32(idx);
  }

  // Key rows per sequence: [recent window | this step's tokens | compressed entries].
  std::vector<Tensor> parts;
  std::vector<std::vector<int32_t>> lists(size_t(batch.rows));
  int64_t base = 0, width = 0;
  for (int64_t s = 0; s < n_seq; ++s) {
    LayerState& st = sequences[size_t(s)]->layers[size_t(layer)];
    const int64_t old = st.recent_kv.empty() ? 0 : st.recent_kv.rows();
    const int64_t n = batch.count[size_t(s)], start = batch.start[size_t(s)];
    const int64_t entries = st.compressed.empty() ? 0 : st.compressed.rows();
    if (old) parts.push_back(be_.decode_kv(st.recent_kv, caches_.kv, hd, c.rope_dim));
    parts.push_back(be_.slice_rows(kv_seen, batch.first_row[size_t(s)], n));
    if (entries) parts.push_back(be_.decode_kv(st.compressed, caches_.kv, hd, c.rope_dim));
    for (int64_t j = 0; j < n; ++j) {
      const int64_t t = start + j, row = batch.first_row[size_t(s)] + j;
      auto& list = lists[size_t(row)];
      for (int64_t p = std::max<int64_t>(0, t - W + 1); p <= t; ++p)
        list.push_back(int32_t(base + (p < start ? p - (start - old) : old + p - start)));
      const int64_t comp_base = base + old + n;
      if (b.ratio == 4) {
        for (int64_t k = 0; k < topk; ++k)
          if (const int32_t e = selected[size_t(row * topk + k)]; e >= 0) list.push_back(int32_t(comp_base + e));
      } else if (b.ratio > 0) {
        for (int64_t e = 0; e < std::min(entries, (t + 1) / b.ratio); ++e) list.push_back(int32_t(comp_base + e));
      }
      width = std::max(width, int64_t(list.size()));
    }
    base += old + n + entries;
    // the window ring keeps the last window-1 encoded rows
    const Tensor all = be_.concat_rows({st.recent_kv, be_.slice_rows(kv_stored, batch.first_row[size_t(s)], n)},
                                       {kv_stored.row_numel()}, kv_stored.type());
    const int64_t keep = std::min(all.rows(), W - 1);
    st.recent_kv = be_.slice_rows(all, all.rows() - keep, keep);
  }
  std::vector<int32_t> idx(size_t(batch.rows * width), -1);
  for (int64_t r = 0; r < batch.rows; ++r) std::copy(lists[size_t(r)].begin(), lists[size_t(r)].end(), idx.begin() + r * width);
  Tensor o = be_.attention(q, be_.concat_rows(parts, {hd}, ElemType::f32), be_.upload_i32(idx, {batch.rows, width}),
                           b.sinks, 1.0 / std::sqrt(double(hd)));
  be_.rope(o, batch.positions, inv_freq, hd, true);
  return be_.linear(be_.grouped_linear(o, b.wo_a, c.o_groups), b.wo_b);
}

Tensor Model::moe(const Block& b, const Tensor& x_in, const Batch& batch) {
  const ModelConfig& c = config_;
  const Tensor x = be_.rms_norm(x_in, &b.ffn_norm, c.dim, c.norm_eps);
  const Routing r = be_.route(be_.linear(x, b.gate), b.gate_bias.empty() ? nullptr : &b.gate_bias,
                              b.hash ? &b.tid2eid : nullptr, batch.ids, c);
  Tensor y = be_.experts(x, r, b.w1, b.w2, b.w3, c.swiglu_limit);
  if (c.n_shared_experts > 0)
    y = be_.add(y, be_.linear(be_.swiglu(be_.linear(x, b.shared_w1), be_.linear(x, b.shared_w3), c.swiglu_limit),
                              b.shared_w2));
  return y;
}

Tensor Model::mtp_logits(int64_t k, const std::vector<SequenceState*>& sequences, const Tensor& hidden,
                         const std::vector<std::vector<int32_t>>& next) {
  const ModelConfig& c = config_;
  if (k < 0 || k >= int64_t(mtp_.size())) runtime_error("this checkpoint has no MTP block ", k);
  const int64_t layer = c.n_layers + k;
  // The MTP block runs at the positions of the step that produced `hidden`.
  const Batch batch = make_batch(sequences, next, true);
  const MtpExtras& m = *mtp_[size_t(k)];
  const Tensor e = be_.linear(be_.rms_norm(be_.embed(embed_, batch.ids), &m.enorm, c.dim, c.norm_eps), m.e_proj);
  std::vector<int32_t> copies;
  for (int64_t r = 0; r < batch.rows; ++r)
    for (int64_t i = 0; i < c.hc_mult; ++i) copies.push_back(int32_t(r));
  const Tensor hn = be_.rms_norm(hidden.view({batch.rows * c.hc_mult, c.dim}), &m.hnorm, c.dim, c.norm_eps);
  Tensor h = be_.add(be_.embed(e, be_.upload_i32(copies, {batch.rows * c.hc_mult})), be_.linear(hn, m.h_proj))
                 .view({batch.rows, c.hc_mult * c.dim});
  h = block_forward(*blocks_[size_t(layer)], layer, h, batch, sequences);
  return head_logits(h, m.hc_fn, m.hc_base, m.hc_scale, m.norm);
}

}  // namespace tetra
