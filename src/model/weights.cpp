#include "model/weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <variant>

#include "core/error.h"
#include "model/weight_names.h"
#include "model/weight_roles.h"

namespace tetra {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool is_dense_float(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

// Resolves checkpoint tensors to canonical names and hands each out at most once.
class Resolver {
 public:
  Resolver(const TensorStore& store, std::vector<std::string>& problems) : store_(store), problems_(problems) {
    for (const auto& name : store.names()) {
      const auto canon = canonical_tensor_name(name);
      if (!canon) {
        problems_.push_back("unknown tensor " + where(name));
        continue;
      }
      auto [it, inserted] = by_canon_.emplace(*canon, name);
      if (!inserted)
        problems_.push_back("duplicated tensor: " + where(it->second) + " and " + where(name) + " are both " + *canon);
    }
  }

  std::string where(const std::string& source) const {
    const auto* loc = store_.find(source);
    return "'" + source + "' in " + (loc ? loc->file->path() : std::string("?"));
  }
  bool has(const std::string& canon) const { return by_canon_.count(canon) > 0; }
  bool any_with_prefix(const std::string& prefix) const {
    for (const auto& [canon, _] : by_canon_)
      if (canon.starts_with(prefix)) return true;
    return false;
  }
  // Takes the tensor with canonical name `canon`, if present.
  std::optional<std::pair<std::string, TensorView>> take(const std::string& canon) {
    auto it = by_canon_.find(canon);
    if (it == by_canon_.end()) return std::nullopt;
    used_.push_back(canon);
    return std::make_pair(it->second, store_.view(*store_.find(it->second)));
  }
  void report_unused() {
    std::sort(used_.begin(), used_.end());
    for (const auto& name : store_.names()) {
      const auto canon = canonical_tensor_name(name);
      if (canon && !std::binary_search(used_.begin(), used_.end(), *canon) && by_canon_.at(*canon) == name)
        problems_.push_back("unknown tensor " + where(name) + " (read as " + *canon + ")");
    }
  }

 private:
  const TensorStore& store_;
  std::vector<std::string>& problems_;
  std::unordered_map<std::string, std::string> by_canon_;  // canonical -> checkpoint name
  std::vector<std::string> used_;
};

std::string describe(const TensorView& v) { return std::string(dtype_name(v.dtype)) + " " + shape_str(v.shape); }

float scalar_f32(const TensorView& v) {
  if (v.dtype == DType::f32) {
    float x;
    std::memcpy(&x, v.data, 4);
    return x;
  }
  if (v.dtype == DType::bf16) {
    uint16_t b;
    std::memcpy(&b, v.data, 2);
    return bf16_to_f32(b);
  }
  return NAN;
}

// The first entry of the hash router's table [vocab, k] that names no expert, as "[row, col] = id";
// empty when every entry lies in [0, experts). (The routers index expert weights with these ids:
// the CPU's checks each row it routes, the CUDA kernel traps.)
std::string first_bad_expert_id(const TensorView& t, int64_t experts) {
  const int64_t n = t.numel(), k = t.shape.size() == 2 && t.shape[1] > 0 ? t.shape[1] : 1;
  for (int64_t i = 0; i < n; ++i) {
    int64_t id;
    if (t.dtype == DType::i32) {
      int32_t v;
      std::memcpy(&v, t.data + 4 * i, 4);
      id = v;
    } else {
      std::memcpy(&id, t.data + 8 * i, 8);
    }
    if (id < 0 || id >= experts)
      return "[" + std::to_string(i / k) + ", " + std::to_string(i % k) + "] = " + std::to_string(id);
  }
  return "";
}

// Detects the format of linear layer `role` from the tensors present and checks shapes.
// Returns an error message, or the filled LinearWeight.
std::variant<LinearWeight, std::string> detect_linear(Resolver& r, const std::string& role, int64_t out, int64_t in) {
  LinearWeight w;
  w.role = role;
  w.out = out;
  w.in = in;
  auto weight = r.take(role + ".weight");
  if (!weight) return role + ".weight is missing";
  w.sources.push_back(weight->first);
  w.weight = weight->second;
  auto scale = r.take(role + ".scale");
  auto wscale = r.take(role + ".weight_scale");
  auto wscale2 = r.take(role + ".weight_scale_2");
  auto iscale = r.take(role + ".input_scale");
  for (auto* t : {&scale, &wscale, &wscale2, &iscale})
    if (*t) w.sources.push_back((*t)->first);
  const std::string where = r.where(weight->first);
  const TensorView& wt = w.weight;
  auto expect = [&](bool ok, const std::string& what) -> std::optional<std::string> {
    if (ok) return std::nullopt;
    return where + " (" + role + "): " + what;
  };
  auto want_shape = [&](const std::optional<std::pair<std::string, TensorView>>& t, const Shape& s,
                        std::initializer_list<DType> dtypes, const char* label) -> std::optional<std::string> {
    if (!t) return where + " (" + role + "): its " + label + " tensor is missing";
    const bool dtype_ok = std::find(dtypes.begin(), dtypes.end(), t->second.dtype) != dtypes.end();
    if (!dtype_ok || t->second.shape != s) {
      std::string allowed;
      for (DType d : dtypes) allowed += (allowed.empty() ? "" : "/") + std::string(dtype_name(d));
      return r.where(t->first) + " (" + label + " of " + role + "): is " + describe(t->second) + ", expected " +
             allowed + " " + shape_str(s);
    }
    return std::nullopt;
  };
  if (iscale) {
    if (iscale->second.numel() != 1 || iscale->second.dtype != DType::f32)
      return r.where(iscale->first) + ": input_scale must be one f32, is " + describe(iscale->second);
    w.input_scale = scalar_f32(iscale->second);
  }

  if (is_dense_float(wt.dtype)) {
    w.format = WeightFormat::dense;
    if (scale || wscale || wscale2) return where + " (" + role + "): a " + describe(wt) + " weight cannot have scale tensors";
    if (auto e = expect(wt.shape == Shape{out, in}, "is " + describe(wt) + ", expected shape " + shape_str({out, in}))) return *e;
    return w;
  }
  if (wt.dtype == DType::f8_e4m3) {
    if (auto e = expect(wt.shape == Shape{out, in}, "is " + describe(wt) + ", expected shape " + shape_str({out, in}))) return *e;
    if (scale && !wscale && !wscale2) {
      if (auto e = want_shape(scale, {ceil_div(out, 128), ceil_div(in, 128)}, {DType::f8_e8m0, DType::f32}, "scale")) return *e;
      w.format = WeightFormat::fp8_block;
      w.scale = scale->second;
      return w;
    }
    if (wscale && !scale && !wscale2) {
      if (wscale->second.numel() != 1 || wscale->second.dtype != DType::f32)
        return r.where(wscale->first) + " (" + role + "): a per-tensor weight_scale must be one f32, is " +
               describe(wscale->second);
      w.format = WeightFormat::fp8_tensor;
      w.scale = wscale->second;
      return w;
    }
    return where + " (" + role + "): an F8_E4M3 weight needs either 'scale' (128x128 blocks) or 'weight_scale' (per tensor)";
  }
  const bool packed_bytes = wt.dtype == DType::u8 || wt.dtype == DType::i8;
  if (wt.dtype == DType::f4_e2m1 || packed_bytes) {
    if (in % 2) return where + " (" + role + "): FP4 weights need an even input dimension, got " + std::to_string(in);
    const Shape logical{out, in}, packed{out, in / 2};
    if (auto e = expect(wt.shape == (wt.dtype == DType::f4_e2m1 ? logical : packed),
                        "is " + describe(wt) + ", expected F4 " + shape_str(logical) + " or U8/I8 " + shape_str(packed)))
      return *e;
    if (wscale || wscale2) {
      if (in % 16) return where + " (" + role + "): NVFP4 needs the input dimension divisible by 16";
      if (auto e = want_shape(wscale, {out, in / 16}, {DType::f8_e4m3}, "weight_scale")) return *e;
      if (!wscale2) return where + " (" + role + "): NVFP4 weight_scale_2 is missing";
      if (wscale2->second.numel() != 1 || wscale2->second.dtype != DType::f32)
        return r.where(wscale2->first) + " (" + role + "): weight_scale_2 must be one f32, is " + describe(wscale2->second);
      if (scale) return r.where(scale->first) + " (" + role + "): an NVFP4 weight cannot also have 'scale'";
      w.format = WeightFormat::nvfp4;
      w.scale = wscale->second;
      w.global_scale = scalar_f32(wscale2->second);
      return w;
    }
    if (in % 32) return where + " (" + role + "): MXFP4 needs the input dimension divisible by 32";
    if (auto e = want_shape(scale, {out, in / 32}, {DType::f8_e8m0}, "scale")) return *e;
    w.format = WeightFormat::mxfp4;
    w.scale = scale->second;
    return w;
  }
  return where + " (" + role + "): dtype " + std::string(dtype_name(wt.dtype)) + " is not a weight format tetra knows";
}

// transformers' in-memory fused experts: gate_up_proj [E, 2I, H] (gate rows first), down_proj [E, H, I].
bool take_fused_experts(Resolver& r, const ModelConfig& c, const std::string& ffn,
                        std::unordered_map<std::string, LinearWeight>& linears, std::vector<std::string>& problems) {
  auto gate_up = r.take(ffn + "experts.gate_up_proj");
  auto down = r.take(ffn + "experts.down_proj");
  if (!gate_up && !down) return false;
  if (!gate_up || !down) {
    problems.push_back(ffn + "experts: fused form needs both gate_up_proj and down_proj");
    return true;
  }
  const int64_t E = c.n_routed_experts, I = c.moe_inter_dim, H = c.dim;
  for (auto* t : {&*gate_up, &*down}) {
    const bool is_gate_up = t == &*gate_up;
    const Shape want = is_gate_up ? Shape{E, 2 * I, H} : Shape{E, H, I};
    if (!is_dense_float(t->second.dtype) || t->second.shape != want) {
      problems.push_back(r.where(t->first) + ": is " + describe(t->second) + ", expected a bf16/f16/f32 " + shape_str(want));
      return true;
    }
  }
  const uint64_t esize = uint64_t(dtype_bits(gate_up->second.dtype) / 8);
  auto slice = [&](const std::pair<std::string, TensorView>& src, int64_t e, int64_t row0, int64_t rows, int64_t cols,
                   const std::string& role) {
    LinearWeight w;
    w.role = role;
    w.format = WeightFormat::dense;
    w.out = rows;
    w.in = cols;
    const uint64_t per_expert = uint64_t(src.second.shape[1] * src.second.shape[2]) * esize;
    w.weight = TensorView{src.second.dtype, {rows, cols},
                          src.second.data + uint64_t(e) * per_expert + uint64_t(row0 * cols) * esize,
                          uint64_t(rows * cols) * esize};
    w.sources.push_back(src.first);
    linears[role] = std::move(w);
  };
  for (int64_t e = 0; e < E; ++e) {
    const std::string x = ffn + "experts." + std::to_string(e) + ".";
    slice(*gate_up, e, 0, I, H, x + "w1");
    slice(*gate_up, e, I, I, H, x + "w3");
    slice(*down, e, 0, H, I, x + "w2");
  }
  return true;
}

}  // namespace

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::dense: return "dense";
    case WeightFormat::fp8_block: return "fp8-block";
    case WeightFormat::fp8_tensor: return "fp8-tensor";
    case WeightFormat::mxfp4: return "mxfp4";
    case WeightFormat::nvfp4: return "nvfp4";
  }
  return "?";
}

ModelWeights::ModelWeights(const ModelConfig& config, const TensorStore& store) {
  std::vector<std::string> problems;
  Resolver r(store, problems);
  has_mtp_ = config.n_mtp_layers > 0 && r.any_with_prefix("mtp.");
  const auto expected = expected_roles(config, has_mtp_);

  // Fused expert tensors replace the per-expert ones of their layer.
  for (int64_t i = 0; i < config.n_layers + (has_mtp_ ? config.n_mtp_layers : 0); ++i) {
    const std::string ffn = i < config.n_layers ? "layers." + std::to_string(i) + ".ffn."
                                                : "mtp." + std::to_string(i - config.n_layers) + ".ffn.";
    take_fused_experts(r, config, ffn, linears_, problems);
  }

  for (const auto& e : expected) {
    switch (e.kind) {
      case RoleKind::linear: {
        if (linears_.count(e.role)) break;  // from fused experts
        if (e.optional && !r.has(e.role + ".weight")) break;
        auto result = detect_linear(r, e.role, e.shape[0], e.shape[1]);
        if (auto* msg = std::get_if<std::string>(&result)) {
          problems.push_back(msg->ends_with("is missing") && !r.has(e.role + ".weight")
                                 ? "missing tensor " + e.role + ".weight (no spelling of it in the checkpoint)"
                                 : *msg);
        } else {
          linears_[e.role] = std::get<LinearWeight>(std::move(result));
        }
        break;
      }
      case RoleKind::param:
      case RoleKind::index: {
        auto t = r.take(e.role);
        if (!t) {
          if (!e.optional) problems.push_back("missing tensor " + e.role + " (no spelling of it in the checkpoint)");
          break;
        }
        const bool is_index = e.kind == RoleKind::index;
        const bool dtype_ok = is_index ? (t->second.dtype == DType::i32 || t->second.dtype == DType::i64)
                                       : is_dense_float(t->second.dtype);
        if (!dtype_ok || t->second.shape != e.shape) {
          problems.push_back(r.where(t->first) + " (" + e.role + "): is " + describe(t->second) + ", expected " +
                             (is_index ? "I32/I64 " : "F32/BF16/F16 ") + shape_str(e.shape));
          break;
        }
        if (is_index) {
          if (const std::string bad = first_bad_expert_id(t->second, config.n_routed_experts); !bad.empty()) {
            problems.push_back(r.where(t->first) + " (" + e.role + "): entry " + bad + " is not an expert id in [0, " +
                               std::to_string(config.n_routed_experts) + ")");
            break;
          }
        }
        params_[e.role] = ParamWeight{e.role, t->second, t->first};
        break;
      }
    }
  }
  r.report_unused();

  if (!problems.empty()) {
    std::string msg = "checkpoint " + (store.files().empty() ? std::string("?") : store.files().front()->path()) +
                      " does not match its config (" + std::to_string(problems.size()) + " problems):";
    const size_t shown = std::min<size_t>(problems.size(), 20);
    for (size_t i = 0; i < shown; ++i) msg += "\n  " + problems[i];
    if (shown < problems.size()) msg += "\n  ... and " + std::to_string(problems.size() - shown) + " more";
    model_error(msg);
  }
  for (const auto& e : expected) {
    if (auto it = linears_.find(e.role); it != linears_.end()) linear_order_.push_back(&it->second);
    if (auto it = params_.find(e.role); it != params_.end()) param_order_.push_back(&it->second);
  }
}

ModelWeights::ModelWeights(const ModelConfig& config, std::vector<LinearWeight> linears, std::vector<ParamWeight> params,
                           bool with_mtp) {
  has_mtp_ = with_mtp;
  std::vector<std::string> problems;
  for (auto& l : linears) {
    const std::string role = l.role;
    if (!linears_.emplace(role, std::move(l)).second) problems.push_back("linear " + role + " given twice");
  }
  for (auto& p : params) {
    const std::string role = p.role;
    if (!params_.emplace(role, std::move(p)).second) problems.push_back("tensor " + role + " given twice");
  }
  const auto expected = expected_roles(config, with_mtp);
  std::unordered_map<std::string, RoleKind> known;
  for (const auto& e : expected) known.emplace(e.role, e.kind);
  for (const auto& [role, _] : linears_)
    if (auto it = known.find(role); it == known.end() || it->second != RoleKind::linear)
      problems.push_back("linear " + role + " is not a role of this config");
  for (const auto& [role, _] : params_)
    if (auto it = known.find(role); it == known.end() || it->second == RoleKind::linear)
      problems.push_back("tensor " + role + " is not a role of this config");
  for (const auto& e : expected) {
    if (e.kind == RoleKind::linear) {
      auto it = linears_.find(e.role);
      if (it == linears_.end()) {
        if (!e.optional) problems.push_back("missing linear " + e.role);
        continue;
      }
      if (Shape{it->second.out, it->second.in} != e.shape)
        problems.push_back("linear " + e.role + " is " + shape_str({it->second.out, it->second.in}) + ", expected " +
                           shape_str(e.shape));
      linear_order_.push_back(&it->second);
    } else {
      auto it = params_.find(e.role);
      if (it == params_.end()) {
        if (!e.optional) problems.push_back("missing tensor " + e.role);
        continue;
      }
      if (it->second.view.shape != e.shape)
        problems.push_back("tensor " + e.role + " is " + shape_str(it->second.view.shape) + ", expected " +
                           shape_str(e.shape));
      param_order_.push_back(&it->second);
    }
  }
  if (!problems.empty()) {
    std::string msg = "weights given by role do not match the config (" + std::to_string(problems.size()) + " problems):";
    const size_t shown = std::min<size_t>(problems.size(), 20);
    for (size_t i = 0; i < shown; ++i) msg += "\n  " + problems[i];
    if (shown < problems.size()) msg += "\n  ... and " + std::to_string(problems.size() - shown) + " more";
    model_error(msg);
  }
}

const LinearWeight& ModelWeights::linear(const std::string& role) const {
  auto it = linears_.find(role);
  if (it == linears_.end()) model_error("no linear weight '", role, "' in this checkpoint");
  return it->second;
}

const ParamWeight& ModelWeights::param(const std::string& role) const {
  auto it = params_.find(role);
  if (it == params_.end()) model_error("no tensor '", role, "' in this checkpoint");
  return it->second;
}

uint64_t ModelWeights::total_bytes() const {
  uint64_t n = 0;
  for (const auto* l : linear_order_) n += l->bytes();
  for (const auto* p : param_order_) n += p->view.nbytes;
  return n;
}

std::vector<float> to_f32(const TensorView& t) {
  const int64_t n = t.numel();
  std::vector<float> out(static_cast<size_t>(n));
  auto load = [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, t.data + i * int64_t(sizeof(T)), sizeof(T));
      out[size_t(i)] = float(v);
    }
  };
  switch (t.dtype) {
    case DType::f32: load(float{}); break;
    case DType::bf16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, t.data + 2 * i, 2);
        out[size_t(i)] = bf16_to_f32(b);
      }
      break;
    case DType::f16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, t.data + 2 * i, 2);
        out[size_t(i)] = f16_to_f32(b);
      }
      break;
    case DType::f8_e4m3:
      for (int64_t i = 0; i < n; ++i) out[size_t(i)] = e4m3_to_f32(uint8_t(t.data[i]));
      break;
    case DType::f8_e5m2:
      for (int64_t i = 0; i < n; ++i) out[size_t(i)] = e5m2_to_f32(uint8_t(t.data[i]));
      break;
    case DType::f8_e8m0:
      for (int64_t i = 0; i < n; ++i) out[size_t(i)] = e8m0_to_f32(uint8_t(t.data[i]));
      break;
    case DType::f4_e2m1:
      for (int64_t i = 0; i < n; ++i) out[size_t(i)] = e2m1_to_f32(fp4_code_at(t.as<uint8_t>(), uint64_t(i)));
      break;
    case DType::u8: case DType::boolean: load(uint8_t{}); break;
    case DType::i8: load(int8_t{}); break;
    case DType::i16: load(int16_t{}); break;
    case DType::i32: load(int32_t{}); break;
    case DType::i64: load(int64_t{}); break;
  }
  return out;
}

std::vector<float> dequantize(const LinearWeight& w) {
  const int64_t out = w.out, in = w.in;
  if (w.format == WeightFormat::dense) return to_f32(w.weight);
  std::vector<float> result(size_t(out * in));
  const std::vector<float> scales = to_f32(w.scale);
  const auto* bytes = w.weight.as<uint8_t>();
  switch (w.format) {
    case WeightFormat::dense: break;
    case WeightFormat::fp8_block: {
      const int64_t scale_cols = ceil_div(in, 128);
      for (int64_t o = 0; o < out; ++o)
        for (int64_t i = 0; i < in; ++i)
          result[size_t(o * in + i)] = e4m3_to_f32(bytes[o * in + i]) * scales[size_t((o / 128) * scale_cols + i / 128)];
      break;
    }
    case WeightFormat::fp8_tensor:
      for (int64_t k = 0; k < out * in; ++k) result[size_t(k)] = e4m3_to_f32(bytes[k]) * scales[0];
      break;
    case WeightFormat::mxfp4:
      for (int64_t o = 0; o < out; ++o)
        for (int64_t i = 0; i < in; ++i)
          result[size_t(o * in + i)] =
              e2m1_to_f32(fp4_code_at(bytes, uint64_t(o * in + i))) * scales[size_t(o * (in / 32) + i / 32)];
      break;
    case WeightFormat::nvfp4:
      for (int64_t o = 0; o < out; ++o)
        for (int64_t i = 0; i < in; ++i)
          result[size_t(o * in + i)] = e2m1_to_f32(fp4_code_at(bytes, uint64_t(o * in + i))) *
                                       scales[size_t(o * (in / 16) + i / 16)] * w.global_scale;
      break;
  }
  return result;
}

}  // namespace tetra
