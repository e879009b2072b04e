#include "model/weight_names.h"

#include <array>
#include <span>
#include <string_view>
#include <vector>

namespace tetra {
namespace {

using Tokens = std::vector<std::string>;

Tokens split(const std::string& s) {
  Tokens out;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    out.push_back(s.substr(start, dot - start));
    if (dot == std::string::npos) return out;
    start = dot + 1;
  }
}

std::string join(std::span<const std::string> t) {
  std::string s;
  for (size_t i = 0; i < t.size(); ++i) s += (i ? "." : "") + t[i];
  return s;
}

struct Rename {
  std::string_view from, to;
};

std::string_view renamed(std::string_view token, std::span<const Rename> table) {
  for (const auto& r : table)
    if (r.from == token) return r.to;
  return token;
}

bool is_number(const std::string& s) {
  return !s.empty() && s.size() < 10 && s.find_first_not_of("0123456789") == std::string::npos;
}

constexpr std::array<Rename, 8> kAttention{{{"q_a_proj", "wq_a"},
                                            {"q_a_norm", "q_norm"},
                                            {"q_b_proj", "wq_b"},
                                            {"kv_proj", "wkv"},
                                            {"o_a_proj", "wo_a"},
                                            {"o_b_proj", "wo_b"},
                                            {"sinks", "attn_sink"},
                                            {"norm", "kv_norm"}}};  // save_pretrained's attn.norm
constexpr std::array<Rename, 4> kCompressor{
    {{"kv_proj", "wkv"}, {"gate_proj", "wgate"}, {"position_bias", "ape"}, {"kv_norm", "norm"}}};
constexpr std::array<Rename, 3> kExpert{{{"gate_proj", "w1"}, {"down_proj", "w2"}, {"up_proj", "w3"}}};

// Rewrites the part of a block name after "layers.N." / "mtp.K."; empty on failure.
std::optional<Tokens> canonical_block(std::span<const std::string> t) {
  if (t.empty()) return std::nullopt;
  Tokens out;
  const std::string& head = t[0];
  if ((head == "attn_hc" || head == "ffn_hc") && t.size() == 2) {
    return Tokens{"hc_" + head.substr(0, head.size() - 3) + "_" + t[1]};
  }
  if (head == "input_layernorm" || head == "post_attention_layernorm") {
    out.push_back(head == "input_layernorm" ? "attn_norm" : "ffn_norm");
    out.insert(out.end(), t.begin() + 1, t.end());
    return out;
  }
  if (head == "self_attn" || head == "attn") {
    out.push_back("attn");
    auto rest = t.subspan(1);
    if (rest.empty()) return std::nullopt;
    if (head == "self_attn" && rest[0] == "compressor" && rest.size() >= 2 && rest[1] == "indexer") {
      // self_attn.compressor.indexer.{kv_proj,gate_proj,position_bias,kv_norm} belong to the
      // indexer's own compressor; q_b_proj and scorer.weights_proj to the indexer.
      auto sub = rest.subspan(2);
      if (sub.empty()) return std::nullopt;
      out.push_back("indexer");
      if (sub[0] == "q_b_proj") {
        out.push_back("wq_b");
      } else if (sub[0] == "scorer" && sub.size() >= 2 && sub[1] == "weights_proj") {
        out.push_back("weights_proj");
        sub = sub.subspan(1);
      } else {
        out.push_back("compressor");
        out.push_back(std::string(renamed(sub[0], kCompressor)));
      }
      out.insert(out.end(), sub.begin() + 1, sub.end());
      return out;
    }
    if (rest[0] == "compressor" || rest[0] == "indexer") {
      // Official / save_pretrained spellings are already canonical inside these modules;
      // in-memory spellings of the compressor are renamed.
      out.push_back(rest[0]);
      if (rest.size() >= 2 && rest[0] == "compressor") {
        out.push_back(std::string(renamed(rest[1], kCompressor)));
        out.insert(out.end(), rest.begin() + 2, rest.end());
      } else {
        out.insert(out.end(), rest.begin() + 1, rest.end());
      }
      return out;
    }
    // `attn.norm.weight` (save_pretrained) is the kv norm; `self_attn.kv_norm` too.
    out.push_back(std::string(renamed(rest[0], kAttention)));
    out.insert(out.end(), rest.begin() + 1, rest.end());
    return out;
  }
  if (head == "mlp" || head == "ffn") {
    out.push_back("ffn");
    auto rest = t.subspan(1);
    if (rest.empty()) return std::nullopt;
    if (rest[0] == "gate" && rest.size() == 2 && rest[1] == "e_score_correction_bias") {
      return Tokens{"ffn", "gate", "bias"};
    }
    if ((rest[0] == "experts" && rest.size() >= 3 && is_number(rest[1])) || rest[0] == "shared_experts") {
      const size_t proj = rest[0] == "experts" ? 2 : 1;
      if (rest.size() <= proj) return std::nullopt;
      out.insert(out.end(), rest.begin(), rest.begin() + long(proj));
      out.push_back(std::string(renamed(rest[proj], kExpert)));
      out.insert(out.end(), rest.begin() + long(proj) + 1, rest.end());
      return out;
    }
    out.insert(out.end(), rest.begin(), rest.end());  // gate.*, fused experts.gate_up_proj / down_proj
    return out;
  }
  out.assign(t.begin(), t.end());  // hc_attn_fn, attn_norm.weight, e_proj.weight, ...
  return out;
}

}  // namespace

std::optional<std::string> canonical_tensor_name(const std::string& name) {
  Tokens t = split(name);
  if (t.size() >= 2 && t[0] == "model") t.erase(t.begin());
  for (const auto& tok : t)
    if (tok.empty()) return std::nullopt;

  Tokens out;
  if ((t[0] == "layers" || t[0] == "mtp") && t.size() >= 3 && is_number(t[1])) {
    auto block = canonical_block(std::span(t).subspan(2));
    if (!block) return std::nullopt;
    out = {t[0], t[1]};
    out.insert(out.end(), block->begin(), block->end());
  } else if (t[0] == "embed_tokens") {
    out = {"embed"};
    out.insert(out.end(), t.begin() + 1, t.end());
  } else if (t[0] == "lm_head") {
    out = {"head"};
    out.insert(out.end(), t.begin() + 1, t.end());
  } else if (t[0] == "hc_head" && t.size() == 2 && t[1].starts_with("hc_")) {
    out = {"hc_head_" + t[1].substr(3)};
  } else {
    out = t;
  }
  if (out.size() >= 2 && out.back() == "weight_scale_inv") out.back() = "scale";
  return join(out);  // the weight registry decides whether it knows the name
}

namespace {

// In-memory spelling of the part of a block name after "layers.N." (official spelling in).
std::string module_block_name(std::span<const std::string> t) {
  const std::string& head = t[0];
  const std::string rest = join(t.subspan(1));
  auto suffix = [&](size_t from) { return from < t.size() ? "." + join(t.subspan(from)) : std::string(); };
  if (head.starts_with("hc_attn_")) return "attn_hc." + head.substr(8);
  if (head.starts_with("hc_ffn_")) return "ffn_hc." + head.substr(7);
  if (head == "attn_norm") return "input_layernorm." + rest;
  if (head == "ffn_norm") return "post_attention_layernorm." + rest;
  auto inverse = [](std::string_view token, std::span<const Rename> table) {
    for (const auto& r : table)
      if (r.to == token && r.from != "norm") return std::string(r.from);
    return std::string(token);
  };
  if (head == "attn" && t.size() >= 2) {
    if (t[1] == "indexer" && t.size() >= 3) {
      if (t[2] == "wq_b") return "self_attn.compressor.indexer.q_b_proj" + suffix(3);
      if (t[2] == "weights_proj") return "self_attn.compressor.indexer.scorer.weights_proj" + suffix(3);
      if (t[2] == "compressor" && t.size() >= 4)
        return "self_attn.compressor.indexer." + inverse(t[3], kCompressor) + suffix(4);
    }
    if (t[1] == "compressor" && t.size() >= 3) return "self_attn.compressor." + inverse(t[2], kCompressor) + suffix(3);
    return "self_attn." + inverse(t[1], kAttention) + suffix(2);
  }
  if (head == "ffn" && t.size() >= 2) {
    if (t[1] == "gate" && t.size() == 3 && t[2] == "bias") return "mlp.gate.e_score_correction_bias";
    if (t[1] == "experts" && t.size() >= 4 && is_number(t[2]))
      return "mlp.experts." + t[2] + "." + inverse(t[3], kExpert) + suffix(4);
    if (t[1] == "shared_experts" && t.size() >= 3) return "mlp.shared_experts." + inverse(t[2], kExpert) + suffix(3);
    return "mlp." + join(t.subspan(1));
  }
  return join(t);
}

}  // namespace

std::string family_tensor_name(const std::string& canonical, NameFamily family) {
  const Tokens t = split(canonical);
  if (family == NameFamily::official) return canonical;
  const bool is_block = (t[0] == "layers" || t[0] == "mtp") && t.size() >= 3;
  if (family == NameFamily::hf_save) {
    if (t[0] == "head") return canonical;
    if (t[0] == "embed") return "model.embed_tokens." + join(std::span(t).subspan(1));
    if (t[0].starts_with("hc_head_")) return "model.hc_head.hc_" + t[0].substr(8);
    if (is_block && t[2] == "attn" && t.size() >= 4 && t[3] == "kv_norm")
      return "model." + t[0] + "." + t[1] + ".attn.norm" + (t.size() > 4 ? "." + join(std::span(t).subspan(4)) : "");
    return "model." + canonical;
  }
  if (t[0] == "head") return "lm_head." + join(std::span(t).subspan(1));
  if (t[0] == "embed") return "model.embed_tokens." + join(std::span(t).subspan(1));
  if (t[0].starts_with("hc_head_")) return "model.hc_head.hc_" + t[0].substr(8);
  if (is_block) return "model." + t[0] + "." + t[1] + "." + module_block_name(std::span(t).subspan(2));
  return "model." + canonical;
}

}  // namespace tetra
