#include "model/config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace tetra {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Typed access to the fields of one JSON object, with errors that name the file and field.
class Fields {
 public:
  Fields(const json& j, std::string origin, std::string prefix = "")
      : j_(j), origin_(std::move(origin)), prefix_(std::move(prefix)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  [[noreturn]] void fail(const char* key, const std::string& why) const {
    model_error(origin_, ": field '", prefix_, key, "' ", why);
  }

  int64_t integer(const char* key) const {
    if (!has(key)) fail(key, "is missing");
    const json& v = j_[key];
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()) return int64_t(v.get<double>());
    fail(key, "must be an integer, got " + v.dump());
  }
  int64_t integer(const char* key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }
  int64_t positive(const char* key) const {
    const int64_t v = integer(key);
    if (v <= 0) fail(key, "must be positive, got " + std::to_string(v));
    return v;
  }
  double number(const char* key) const {
    if (!has(key)) fail(key, "is missing");
    if (!j_[key].is_number()) fail(key, "must be a number, got " + j_[key].dump());
    return j_[key].get<double>();
  }
  double number(const char* key, double fallback) const { return has(key) ? number(key) : fallback; }
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
  y.factor = f.number("factor");
  y.original_max_position = f.number("original_max_position_embeddings");
  y.beta_fast = f.number("beta_fast", 32);
  y.beta_slow = f.number("beta_slow", 1);
  if (y.factor <= 0) f.fail("factor", "must be positive");
  if (y.original_max_position <= 0) f.fail("original_max_position_embeddings", "must be positive");
  if (f.has("attention_factor") && f.number("attention_factor") != 1.0)
    f.fail("attention_factor", "must be 1 (DeepSeek-V4 does not scale cos/sin)");
  return y;
}

// transformers 5: layer_types + compress_rates + mlp_layer_types + nested rope_parameters.
void read_transformers_layout(const Fields& f, ModelConfig& c) {
  const json& types = f.array("layer_types");
  static const json kNoRates = json::object();
  const Fields rates = f.has("compress_rates") ? f.object("compress_rates") : Fields(kNoRates, "", "");
  const int64_t csa = rates.has("compressed_sparse_attention") ? rates.integer("compressed_sparse_attention") : 4;
  const int64_t hca = rates.has("heavily_compressed_attention") ? rates.integer("heavily_compressed_attention") : 128;
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
    const int64_t n_hash = f.integer("num_hash_layers", 3);
    for (int64_t i = 0; i < int64_t(types.size()); ++i) c.hash_routed.push_back(i < n_hash);
  }
  if (f.has("partial_rotary_factor")) c.rope_dim = int64_t(std::llround(f.number("partial_rotary_factor") * double(c.head_dim)));
  if (f.has("qk_rope_head_dim")) c.rope_dim = f.integer("qk_rope_head_dim");
  if (c.rope_dim == 0) f.fail("partial_rotary_factor", "is missing (or qk_rope_head_dim)");
  c.n_mtp_layers = f.integer("num_nextn_predict_layers", 0);
  if (f.has("rope_parameters")) {
    const Fields rp = f.object("rope_parameters");
    if (rp.has("main") || rp.has("compress")) {
      const Fields main = rp.object("main");
      if (main.string("rope_type", "default") != "default") main.fail("rope_type", "must be 'default' for sliding layers");
      c.rope_theta = main.number("rope_theta", c.rope_theta);
      const Fields compress = rp.object("compress");
      c.compress_rope_theta = compress.number("rope_theta", c.compress_rope_theta);
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
    if (!r.is_number_integer() || r.get<int64_t>() < 0) f.fail("compress_ratios", "has a non-integer or negative entry " + r.dump());
    c.compress_ratios.push_back(r.get<int64_t>());
  }
  c.n_mtp_layers = f.integer("num_nextn_predict_layers", 0);
  if (int64_t(c.compress_ratios.size()) == c.n_layers + c.n_mtp_layers) {
    c.compress_ratios.resize(size_t(c.n_layers));  // the MTP block is sliding-only
  } else if (int64_t(c.compress_ratios.size()) != c.n_layers) {
    f.fail("compress_ratios", "has " + std::to_string(c.compress_ratios.size()) + " entries; expected num_hidden_layers (" +
                                  std::to_string(c.n_layers) + ") or that plus num_nextn_predict_layers");
  }
  const int64_t n_hash = f.integer("num_hash_layers", 0);
  if (n_hash < 0 || n_hash > c.n_layers) f.fail("num_hash_layers", "must be between 0 and num_hidden_layers");
  for (int64_t i = 0; i < c.n_layers; ++i) c.hash_routed.push_back(i < n_hash);
  c.rope_dim = f.integer("qk_rope_head_dim");
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
           "gives a rope dimension of " + std::to_string(c.rope_dim) + "; it must be even and at most head_dim");
  if (c.rope_dim > c.index_head_dim) f.fail("index_head_dim", "must be at least the rope dimension");
  if (c.n_activated_experts > c.n_routed_experts) f.fail("num_experts_per_tok", "exceeds n_routed_experts");
  if (int64_t(c.compress_ratios.size()) != c.n_layers)
    f.fail("layer_types", "has " + std::to_string(c.compress_ratios.size()) + " entries for " +
                              std::to_string(c.n_layers) + " layers");
  if (int64_t(c.hash_routed.size()) != c.n_layers)
    f.fail("mlp_layer_types", "has " + std::to_string(c.hash_routed.size()) + " entries for " +
                                  std::to_string(c.n_layers) + " layers");
  if (c.hc_mult <= 0) f.fail("hc_mult", "must be positive");
  if (c.hc_sinkhorn_iters <= 0) f.fail("hc_sinkhorn_iters", "must be positive");
  if (c.n_mtp_layers < 0) f.fail("num_nextn_predict_layers", "must not be negative");
  if (f.has("num_key_value_heads") && f.integer("num_key_value_heads") != 1)
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
  const json j = json::parse(json_text, nullptr, false);
  if (j.is_discarded()) model_error(origin, ": not valid JSON");
  if (!j.is_object()) model_error(origin, ": not a JSON object");
  const Fields f(j, origin);
  if (f.has("model_type") && f.string("model_type") != "deepseek_v4")
    f.fail("model_type", "is '" + f.string("model_type") + "', expected 'deepseek_v4'");

  ModelConfig c;
  c.vocab_size = f.positive("vocab_size");
  c.dim = f.positive("hidden_size");
  c.n_layers = f.positive("num_hidden_layers");
  c.n_heads = f.positive("num_attention_heads");
  c.head_dim = f.positive("head_dim");
  c.q_lora_rank = f.positive("q_lora_rank");
  c.o_groups = f.positive("o_groups");
  c.o_lora_rank = f.positive("o_lora_rank");
  c.n_routed_experts = f.positive("n_routed_experts");
  c.n_activated_experts = f.positive("num_experts_per_tok");
  c.n_shared_experts = f.integer("n_shared_experts", 1);
  c.moe_inter_dim = f.positive("moe_intermediate_size");
  c.index_n_heads = f.positive("index_n_heads");
  c.index_head_dim = f.positive("index_head_dim");
  c.index_topk = f.positive("index_topk");
  c.window = f.positive("sliding_window");
  c.hc_mult = f.integer("hc_mult", 4);
  c.hc_sinkhorn_iters = f.integer("hc_sinkhorn_iters", 20);
  c.hc_eps = f.number("hc_eps", 1e-6);
  c.norm_eps = f.number("rms_norm_eps", 1e-6);
  const std::string scoring = f.string("scoring_func", "sqrtsoftplus");
  if (scoring == "sqrtsoftplus") c.scoring = ScoringFunc::sqrtsoftplus;
  else if (scoring == "softmax") c.scoring = ScoringFunc::softmax;
  else if (scoring == "sigmoid") c.scoring = ScoringFunc::sigmoid;
  else f.fail("scoring_func", "must be sqrtsoftplus, softmax or sigmoid, got '" + scoring + "'");
  c.norm_topk_prob = f.boolean("norm_topk_prob", true);
  c.route_scale = f.number("routed_scaling_factor", 1.0);
  c.swiglu_limit = f.number("swiglu_limit", 0.0);
  c.rope_theta = f.number("rope_theta", 10000);
  c.compress_rope_theta = f.number("compress_rope_theta", 160000);
  c.max_position_embeddings = f.integer("max_position_embeddings", 0);
  c.bos_token_id = f.integer("bos_token_id", -1);
  c.eos_token_id = f.has("eos_token_id") && f.raw()["eos_token_id"].is_array() ? -1 : f.integer("eos_token_id", -1);
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
  const fs::path path = fs::path(dir) / "config.json";
  std::ifstream in(path);
  if (!in) model_error(path.string(), ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  ModelConfig c = parse_model_config(ss.str(), path.string());

  // ModelOpt exports repeat the algorithm in hf_quant_config.json; the two must agree.
  const fs::path hq = fs::path(dir) / "hf_quant_config.json";
  if (fs::exists(hq)) {
    std::ifstream qin(hq);
    const json j = json::parse(qin, nullptr, false);
    if (j.is_discarded() || !j.is_object()) model_error(hq.string(), ": not valid JSON");
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
