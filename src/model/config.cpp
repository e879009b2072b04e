#include "model/config.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "io/json_file.h"
#include "io/mapped_file.h"

namespace tetra {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Limits on config.json's values, far above any DeepSeek-V4 (V4-Pro: hidden 7168, 128 heads of
// 512, ranks and intermediate sizes up to 3072, 384 experts over 61 layers, top-k 1024, window
// 128, ratios up to 128, vocab 129280, context 2^20), so that a corrupt value fails here rather
// than overflowing a product later (any three widths multiply to under 2^60), sizing an absurd
// allocation or running a loop for ever.
constexpr int64_t kMaxWidth = int64_t(1) << 20;  // hidden_size, head_dim, ranks, intermediate sizes
constexpr int64_t kMaxCount = int64_t(1) << 16;  // heads, experts, index_topk, sliding_window, compress ratios
constexpr int64_t kMaxLayers = 4096;             // num_hidden_layers, num_nextn_predict_layers
constexpr int64_t kMaxExpertRoles = int64_t(1) << 20;  // (layers + MTP layers) x experts: each has its own weights
constexpr int64_t kMaxHcMult = 16;                     // V4: 4
constexpr int64_t kMaxSinkhornIters = 1000;            // V4: 20, run for every token in every block
constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();  // vocab and context: ids and positions are int32
constexpr double kMaxReal = std::numeric_limits<float>::max();      // used in fp32: converting more is undefined

// A range of numbers, open below where `above`.
struct Range {
  double lo, hi;
  bool above = false;
};
constexpr Range kPositive{0, kMaxReal, true};
// An epsilon guards a division by a sum that can be 0: it must be a normal fp32 number (1e-50
// is 0 in fp32, as are denormals where a GPU flushes them).
constexpr Range kEps{std::numeric_limits<float>::min(), 1};
constexpr Range kRopeTheta{1, kMaxReal, true};  // YaRN divides by ln(theta)

// v as an int64: integers, and floats that are integral (4.0) and in range (casting 1e30 was
// undefined behaviour, and 2^64 - 1 read as -1).
std::optional<int64_t> as_int64(const json& v) {
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) return {};
  if (v.is_number_integer()) return v.get<int64_t>();
  if (!v.is_number_float()) return {};
  const double d = v.get<double>();
  if (std::floor(d) != d || std::fabs(d) >= 0x1p63) return {};
  return int64_t(d);
}

// Typed access to the fields of one JSON object, with errors that name the file and field.
class Fields {
 public:
  Fields(const json& j, std::string origin, std::string prefix = "")
      : j_(j), origin_(std::move(origin)), prefix_(std::move(prefix)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  [[noreturn]] void fail(const char* key, const std::string& why) const {
    model_error(origin_, ": field '", prefix_, key, "' ", why);
  }

  int64_t integer(const char* key, int64_t lo, int64_t hi) const {
    if (!has(key)) fail(key, "is missing");
    const auto v = as_int64(j_[key]);
    if (!v || *v < lo || *v > hi) fail(key, cat("must be an integer in [", lo, ", ", hi, "], got ", j_[key].dump()));
    return *v;
  }
  int64_t integer(const char* key, int64_t lo, int64_t hi, int64_t fallback) const {
    return has(key) ? integer(key, lo, hi) : fallback;
  }
  double number(const char* key) const {
    if (!has(key)) fail(key, "is missing");
    if (!j_[key].is_number()) fail(key, "must be a number, got " + j_[key].dump());
    return j_[key].get<double>();
  }
  double number(const char* key, Range r) const {
    const double v = number(key);
    if (!(r.above ? v > r.lo : v >= r.lo) || v > r.hi)
      fail(key, cat("must be a number in ", r.above ? "(" : "[", r.lo, ", ", r.hi, "], got ", j_[key].dump()));
    return v;
  }
  double number(const char* key, Range r, double fallback) const { return has(key) ? number(key, r) : fallback; }
  std::string string(const char* key) const {
    if (!has(key)) fail(key, "is missing");
    if (!j_[key].is_string()) fail(key, "must be a string, got " + j_[key].dump());
    return j_[key].get<std::string>();
  }
  std::string string(const char* key, const std::string& fallback) const { return has(key) ? string(key) : fallback; }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_boolean()) fail(key, "must be true or false, got " + j_[key].dump());
    return j_[key].get<bool>();
  }
  Fields object(const char* key) const {
    if (!has(key) || !j_[key].is_object()) fail(key, "must be an object");
    return Fields(j_[key], origin_, prefix_ + key + ".");
  }
  const json& array(const char* key) const {
    if (!has(key) || !j_[key].is_array()) fail(key, "must be a list");
    return j_[key];
  }
  const json& raw() const { return j_; }

 private:
  const json& j_;
  std::string origin_;
  std::string prefix_;
};

YarnScaling parse_yarn(const Fields& f) {
  YarnScaling y;
  const std::string type = f.has("rope_type") ? f.string("rope_type") : f.string("type", "default");
  if (type == "default" || type == "none") return y;
  if (type != "yarn") f.fail("rope_type", "must be 'yarn' or 'default', got '" + type + "'");
  y.enabled = true;
  y.factor = f.number("factor", {1, kMaxReal});  // YaRN stretches the context
  y.original_max_position = f.number("original_max_position_embeddings", kPositive);
  y.beta_fast = f.number("beta_fast", kPositive, 32);  // logarithms of these
  y.beta_slow = f.number("beta_slow", kPositive, 1);
  if (f.has("attention_factor") && f.number("attention_factor") != 1.0)
    f.fail("attention_factor", "must be 1 (DeepSeek-V4 does not scale cos/sin)");
  return y;
}

// transformers 5: layer_types + compress_rates + mlp_layer_types + nested rope_parameters.
void read_transformers_layout(const Fields& f, ModelConfig& c) {
  const json& types = f.array("layer_types");
  static const json kNoRates = json::object();
  const Fields rates = f.has("compress_rates") ? f.object("compress_rates") : Fields(kNoRates, "", "");
  // As in the reference, ratio 4 is what makes a layer CSA (overlapping windows and an
  // indexer) and any other ratio HCA: a CSA rate of 8 ran as HCA, an HCA rate of 4 as CSA.
  const int64_t csa = rates.integer("compressed_sparse_attention", 1, kMaxCount, 4);
  const int64_t hca = rates.integer("heavily_compressed_attention", 1, kMaxCount, 128);
  if (csa != 4)
    rates.fail("compressed_sparse_attention", "must be 4 (any other ratio is HCA), got " + std::to_string(csa));
  if (hca == 4) rates.fail("heavily_compressed_attention", "must not be 4 (ratio 4 is CSA)");
  for (const auto& t : types) {
    const std::string s = t.is_string() ? t.get<std::string>() : "";
    if (s == "sliding_attention") c.compress_ratios.push_back(0);
    else if (s == "compressed_sparse_attention") c.compress_ratios.push_back(csa);
    else if (s == "heavily_compressed_attention") c.compress_ratios.push_back(hca);
    else f.fail("layer_types", "has an unknown entry " + t.dump());
  }
  if (f.has("mlp_layer_types")) {
    for (const auto& t : f.array("mlp_layer_types")) {
      const std::string s = t.is_string() ? t.get<std::string>() : "";
      if (s != "hash_moe" && s != "moe") f.fail("mlp_layer_types", "has an unknown entry " + t.dump());
      c.hash_routed.push_back(s == "hash_moe");
    }
  } else {
    // One per layer_types entry: validate() holds that count to num_hidden_layers (a loop to
    // num_hidden_layers ran as long as the number said, 10^12 times for a config that said so).
    const int64_t n_hash = f.integer("num_hash_layers", 0, c.n_layers, 3);
    for (int64_t i = 0; i < int64_t(types.size()); ++i) c.hash_routed.push_back(i < n_hash);
  }
  if (f.has("partial_rotary_factor"))
    c.rope_dim = int64_t(std::llround(f.number("partial_rotary_factor", {0, 1, true}) * double(c.head_dim)));
  if (f.has("qk_rope_head_dim")) c.rope_dim = f.integer("qk_rope_head_dim", 1, kMaxWidth);
  if (!f.has("partial_rotary_factor") && !f.has("qk_rope_head_dim"))
    f.fail("partial_rotary_factor", "is missing (or qk_rope_head_dim)");
  c.n_mtp_layers = f.integer("num_nextn_predict_layers", 0, kMaxLayers, 0);
  if (f.has("rope_parameters")) {
    const Fields rp = f.object("rope_parameters");
    if (rp.has("main") || rp.has("compress")) {
      const Fields main = rp.object("main");
      if (main.string("rope_type", "default") != "default") main.fail("rope_type", "must be 'default' for sliding layers");
      c.rope_theta = main.number("rope_theta", kRopeTheta, c.rope_theta);
      const Fields compress = rp.object("compress");
      c.compress_rope_theta = compress.number("rope_theta", kRopeTheta, c.compress_rope_theta);
      c.yarn = parse_yarn(compress);
    } else {
      c.yarn = parse_yarn(rp);
    }
  }
}

// Repo-root legacy form: compress_ratios (MTP layers included), num_hash_layers,
// qk_rope_head_dim, rope_scaling.
void read_legacy_layout(const Fields& f, ModelConfig& c) {
  const json& ratios = f.array("compress_ratios");
  for (const auto& r : ratios) {
    const auto v = as_int64(r);
    if (!v || *v < 0 || *v > kMaxCount)
      f.fail("compress_ratios", cat("has an entry ", r.dump(), "; each must be an integer in [0, ", kMaxCount, "]"));
    c.compress_ratios.push_back(*v);
  }
  c.n_mtp_layers = f.integer("num_nextn_predict_layers", 0, kMaxLayers, 0);
  if (int64_t(c.compress_ratios.size()) == c.n_layers + c.n_mtp_layers) {
    c.compress_ratios.resize(size_t(c.n_layers));  // the MTP block is sliding-only
  } else if (int64_t(c.compress_ratios.size()) != c.n_layers) {
    f.fail("compress_ratios", "has " + std::to_string(c.compress_ratios.size()) + " entries; expected num_hidden_layers (" +
                                  std::to_string(c.n_layers) + ") or that plus num_nextn_predict_layers");
  }
  const int64_t n_hash = f.integer("num_hash_layers", 0, c.n_layers, 0);
  for (int64_t i = 0; i < c.n_layers; ++i) c.hash_routed.push_back(i < n_hash);
  c.rope_dim = f.integer("qk_rope_head_dim", 1, kMaxWidth);
  if (f.has("rope_scaling")) c.yarn = parse_yarn(f.object("rope_scaling"));
}

void read_quantization(const Fields& f, ModelConfig& c) {
  c.quant.expert_dtype = f.string("expert_dtype", "");
  if (!f.has("quantization_config")) return;
  const Fields q = f.object("quantization_config");
  c.quant.method = q.string("quant_method");
  if (c.quant.method == "fp8") {
    if (q.has("weight_block_size")) {
      const json& b = q.array("weight_block_size");
      if (b != json::array({128, 128})) q.fail("weight_block_size", "must be [128, 128], got " + b.dump());
    }
    if (q.has("fmt") && q.string("fmt") != "e4m3") q.fail("fmt", "must be 'e4m3'");
  } else if (c.quant.method == "modelopt") {
    c.quant.quant_algo = q.string("quant_algo", "");
  } else {
    q.fail("quant_method", "must be 'fp8' or 'modelopt', got '" + c.quant.method + "'");
  }
}

void validate(const Fields& f, ModelConfig& c) {
  if (c.n_heads % c.o_groups) f.fail("o_groups", "must divide num_attention_heads");
  if (c.rope_dim <= 0 || c.rope_dim % 2 || c.rope_dim > c.head_dim)
    f.fail(c.form == ConfigForm::legacy ? "qk_rope_head_dim" : "partial_rotary_factor",
           "gives a rope dimension of " + std::to_string(c.rope_dim) + "; it must be positive, even and at most head_dim");
  if (c.rope_dim > c.index_head_dim) f.fail("index_head_dim", "must be at least the rope dimension");
  if (c.n_activated_experts > c.n_routed_experts) f.fail("num_experts_per_tok", "exceeds n_routed_experts");
  if (int64_t(c.compress_ratios.size()) != c.n_layers)
    f.fail("layer_types", "has " + std::to_string(c.compress_ratios.size()) + " entries for " +
                              std::to_string(c.n_layers) + " layers");
  if (int64_t(c.hash_routed.size()) != c.n_layers)
    f.fail("mlp_layer_types", "has " + std::to_string(c.hash_routed.size()) + " entries for " +
                                  std::to_string(c.n_layers) + " layers");
  if ((c.n_layers + c.n_mtp_layers) * c.n_routed_experts > kMaxExpertRoles)
    f.fail("n_routed_experts", cat("times the layers (num_hidden_layers + num_nextn_predict_layers) must be at most ",
                                   kMaxExpertRoles, ", got ", (c.n_layers + c.n_mtp_layers) * c.n_routed_experts));
  if (f.has("num_key_value_heads") && f.integer("num_key_value_heads", 1, kMaxCount) != 1)
    f.fail("num_key_value_heads", "must be 1 (DeepSeek-V4 shares one KV head)");
  if (f.has("hidden_act") && f.string("hidden_act") != "silu") f.fail("hidden_act", "must be 'silu'");
}

}  // namespace

AttentionKind ModelConfig::attention_kind(int64_t layer) const {
  const int64_t r = layer < n_layers ? compress_ratios[size_t(layer)] : 0;  // MTP: sliding-only
  return r == 0 ? AttentionKind::sliding : r == 4 ? AttentionKind::csa : AttentionKind::hca;
}

int64_t ModelConfig::n_hash_layers() const {
  int64_t n = 0;
  for (bool h : hash_routed) n += h;
  return n;
}

std::string ModelConfig::summary() const {
  std::ostringstream os;
  int64_t sliding = 0, csa = 0, hca = 0;
  for (int64_t i = 0; i < n_layers; ++i) {
    const auto k = attention_kind(i);
    (k == AttentionKind::sliding ? sliding : k == AttentionKind::csa ? csa : hca)++;
  }
  const char* scoring_name = scoring == ScoringFunc::sqrtsoftplus ? "sqrtsoftplus" : scoring == ScoringFunc::softmax ? "softmax" : "sigmoid";
  os << "config form      " << (form == ConfigForm::transformers ? "transformers" : "legacy")
     << (quant.method.empty() ? "" : " + quantization_config " + quant.method)
     << (quant.quant_algo.empty() ? "" : " (" + quant.quant_algo + ")") << "\n"
     << "layers           " << n_layers << " (sliding " << sliding << ", CSA " << csa << ", HCA " << hca
     << ") + " << n_mtp_layers << " MTP, hash-routed " << n_hash_layers() << "\n"
     << "hidden           " << dim << ", hc_mult " << hc_mult << ", vocab " << vocab_size << "\n"
     << "attention        " << n_heads << " heads x " << head_dim << " (rope " << rope_dim << "), q_lora "
     << q_lora_rank << ", o_groups " << o_groups << " x " << o_lora_rank << ", window " << window << "\n"
     << "indexer          " << index_n_heads << " heads x " << index_head_dim << ", top-k " << index_topk << "\n"
     << "moe              " << n_routed_experts << " experts, " << n_activated_experts << " active, "
     << n_shared_experts << " shared, inter " << moe_inter_dim << ", " << scoring_name << ", scale " << route_scale << "\n"
     << "rope             theta " << rope_theta << " / compressed " << compress_rope_theta;
  if (yarn.enabled) os << " yarn x" << yarn.factor << " (L " << yarn.original_max_position << ")";
  os << "\n";
  return os.str();
}

ModelConfig parse_model_config(const std::string& json_text, const std::string& origin) {
  const json j = parse_json(json_text, origin);
  if (!j.is_object()) model_error(origin, ": not a JSON object");
  const Fields f(j, origin);
  if (f.has("model_type") && f.string("model_type") != "deepseek_v4")
    f.fail("model_type", "is '" + f.string("model_type") + "', expected 'deepseek_v4'");

  ModelConfig c;
  c.vocab_size = f.integer("vocab_size", 1, kMaxInt32);
  c.dim = f.integer("hidden_size", 1, kMaxWidth);
  c.n_layers = f.integer("num_hidden_layers", 1, kMaxLayers);
  c.n_heads = f.integer("num_attention_heads", 1, kMaxCount);
  c.head_dim = f.integer("head_dim", 1, kMaxWidth);
  c.q_lora_rank = f.integer("q_lora_rank", 1, kMaxWidth);
  c.o_groups = f.integer("o_groups", 1, kMaxCount);
  c.o_lora_rank = f.integer("o_lora_rank", 1, kMaxWidth);
  c.n_routed_experts = f.integer("n_routed_experts", 1, kMaxCount);
  c.n_activated_experts = f.integer("num_experts_per_tok", 1, kMaxCount);
  c.n_shared_experts = f.integer("n_shared_experts", 0, kMaxCount, 1);
  c.moe_inter_dim = f.integer("moe_intermediate_size", 1, kMaxWidth);
  c.index_n_heads = f.integer("index_n_heads", 1, kMaxCount);
  c.index_head_dim = f.integer("index_head_dim", 1, kMaxWidth);
  c.index_topk = f.integer("index_topk", 1, kMaxCount);
  c.window = f.integer("sliding_window", 1, kMaxCount);
  c.hc_mult = f.integer("hc_mult", 1, kMaxHcMult, 4);
  c.hc_sinkhorn_iters = f.integer("hc_sinkhorn_iters", 1, kMaxSinkhornIters, 20);
  c.hc_eps = f.number("hc_eps", kEps, 1e-6);
  c.norm_eps = f.number("rms_norm_eps", kEps, 1e-6);
  const std::string scoring = f.string("scoring_func", "sqrtsoftplus");
  if (scoring == "sqrtsoftplus") c.scoring = ScoringFunc::sqrtsoftplus;
  else if (scoring == "softmax") c.scoring = ScoringFunc::softmax;
  else if (scoring == "sigmoid") c.scoring = ScoringFunc::sigmoid;
  else f.fail("scoring_func", "must be sqrtsoftplus, softmax or sigmoid, got '" + scoring + "'");
  c.norm_topk_prob = f.boolean("norm_topk_prob", true);
  c.route_scale = f.number("routed_scaling_factor", kPositive, 1.0);
  c.swiglu_limit = f.number("swiglu_limit", {0, kMaxReal}, 0.0);
  c.rope_theta = f.number("rope_theta", kRopeTheta, 10000);
  c.compress_rope_theta = f.number("compress_rope_theta", kRopeTheta, 160000);
  c.max_position_embeddings = f.integer("max_position_embeddings", 0, kMaxInt32, 0);  // 0: not given
  c.bos_token_id = f.integer("bos_token_id", -1, c.vocab_size - 1, -1);  // -1: none
  const bool eos_list = f.has("eos_token_id") && f.raw()["eos_token_id"].is_array();
  c.eos_token_id = eos_list ? -1 : f.integer("eos_token_id", -1, c.vocab_size - 1, -1);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);

  if (f.has("layer_types")) {
    c.form = ConfigForm::transformers;
    read_transformers_layout(f, c);
  } else if (f.has("compress_ratios")) {
    c.form = ConfigForm::legacy;
    read_legacy_layout(f, c);
  } else {
    model_error(origin, ": field 'layer_types' (transformers form) or 'compress_ratios' (legacy form) is missing");
  }
  read_quantization(f, c);
  validate(f, c);
  return c;
}

ModelConfig load_model_config(const std::string& dir) {
  const std::string path = (fs::path(dir) / "config.json").string();
  ModelConfig c = parse_model_config(read_regular_file(path), path);

  // ModelOpt exports repeat the algorithm in hf_quant_config.json; the two must agree.
  const fs::path hq = fs::path(dir) / "hf_quant_config.json";
  if (entry_exists(hq.string())) {
    const json j = read_json_file(hq.string());
    if (!j.is_object()) model_error(hq.string(), ": not a JSON object");
    const Fields q = Fields(j, hq.string()).object("quantization");
    const std::string algo = q.string("quant_algo");
    if (c.quant.method.empty()) c.quant.method = "modelopt";
    if (!c.quant.quant_algo.empty() && c.quant.quant_algo != algo)
      q.fail("quant_algo", "is '" + algo + "' but config.json says '" + c.quant.quant_algo + "'");
    c.quant.quant_algo = algo;
  }
  return c;
}

}  // namespace tetra
