#include "bench/synthetic_weights.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include "bench/random_fill.h"
#include "core/error.h"
#include "model/weight_roles.h"

namespace tetra::bench {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Root mean square of a uniformly random e2m1 code: sqrt(mean of {0,.5,1,1.5,2,3,4,6}²).
const float kE2m1Rms = std::sqrt(68.5f / 8.0f);

// Power-of-two scales (ue8m0) cannot hit a target spread exactly: the scale is the power of two
// that puts the codes' own spread near `code_spread` (within a factor of sqrt 2), and the codes
// are drawn with whatever spread makes up the rest, so the weights get the target spread.
int power_of_two_exponent(float target, float code_spread) { return int(std::lround(std::log2(target / code_spread))); }
uint8_t e8m0_byte(int exponent) { return uint8_t(exponent + 127); }

// Which of a layer's parameters a role is, for picking its values.
std::string param_kind(const std::string& role) {
  auto ends = [&](const char* s) { return role.ends_with(s); };
  if (role == "embed.weight") return "embed";
  if (ends("norm.weight")) return "norm";
  if (ends("_fn")) return "hc_fn";
  if (ends("_base")) return "hc_base";
  if (ends("_scale")) return "hc_scale";
  if (ends("attn_sink")) return "sink";
  if (ends(".ape")) return "ape";
  if (ends("gate.bias")) return "router_bias";
  if (ends("gate.tid2eid")) return "tid2eid";
  model_error("synthetic weights: no value rule for tensor ", role);
}

}  // namespace

SyntheticFormat parse_synthetic_format(const std::string& s) {
  if (s == "nvfp4") return SyntheticFormat::nvfp4;
  if (s == "mxfp4-fp8") return SyntheticFormat::mxfp4_fp8;
  usage_error("--format must be nvfp4 or mxfp4-fp8, got '", s, "'");
}

const char* synthetic_format_name(SyntheticFormat f) { return f == SyntheticFormat::nvfp4 ? "nvfp4" : "mxfp4-fp8"; }

WeightFormat synthetic_weight_format(const std::string& role, SyntheticFormat f) {
  const bool bf16 = role == "head" || role.ends_with("ffn.gate") || role.find("compressor.") != std::string::npos ||
                    role.ends_with("weights_proj");
  if (bf16) return WeightFormat::dense;
  if (role.find(".experts.") != std::string::npos)
    return f == SyntheticFormat::nvfp4 ? WeightFormat::nvfp4 : WeightFormat::mxfp4;
  return f == SyntheticFormat::nvfp4 ? WeightFormat::fp8_tensor : WeightFormat::fp8_block;
}

uint64_t linear_bytes(WeightFormat f, int64_t out, int64_t in) {
  const uint64_t n = uint64_t(out) * uint64_t(in);
  switch (f) {
    case WeightFormat::dense: return 2 * n;  // bf16
    case WeightFormat::fp8_block: return n + uint64_t(ceil_div(out, 128) * ceil_div(in, 128));
    case WeightFormat::fp8_tensor: return n + 4;
    case WeightFormat::mxfp4: return n / 2 + n / 32;
    case WeightFormat::nvfp4: return n / 2 + n / 16;
  }
  return 0;
}

namespace {

// The bytes of the roles `counted` takes.
uint64_t role_bytes(const ModelConfig& c, SyntheticFormat f, const std::function<bool(const std::string&)>& counted) {
  uint64_t total = 0;
  for (const auto& e : expected_roles(c, false)) {
    if (!counted(e.role)) continue;
    // Optional roles are the tied head and the hash layers' router bias: absent, as published.
    if (e.optional) continue;
    if (e.kind == RoleKind::linear)
      total += linear_bytes(synthetic_weight_format(e.role, f), e.shape[0], e.shape[1]);
    else
      total += 4 * uint64_t(shape_numel(e.shape));
  }
  return total;
}

}  // namespace

uint64_t synthetic_model_bytes(const ModelConfig& c, SyntheticFormat f) {
  return role_bytes(c, f, [](const std::string&) { return true; });
}

uint64_t synthetic_routed_expert_bytes(const ModelConfig& c, SyntheticFormat f) {
  return role_bytes(c, f, [](const std::string& role) { return role.find(".ffn.experts.") != std::string::npos; });
}

SyntheticWeights::SyntheticWeights(const ModelConfig& config, SyntheticFormat format, uint64_t seed)
    : config_(config), seed_(seed) {
  std::vector<LinearWeight> linears;
  std::vector<ParamWeight> params;
  for (const auto& e : expected_roles(config_, false)) {
    if (e.optional) continue;  // the tied head, the hash layers' router bias: absent, as published
    if (e.kind == RoleKind::linear)
      linears.push_back(make_linear(e.role, synthetic_weight_format(e.role, format), e.shape[0], e.shape[1]));
    else
      params.push_back(make_param(e.role, e.shape, e.kind == RoleKind::index));
  }
  weights_ = std::make_unique<ModelWeights>(config_, std::move(linears), std::move(params), false);
}

uint64_t SyntheticWeights::host_bytes() const {
  uint64_t n = 0;
  for (const auto& [key, b] : buffers_) n += b.size();
  return n;
}

const std::vector<std::byte>& SyntheticWeights::buffer(const std::string& kind, DType dtype, const Shape& shape,
                                                       float spread) {
  const auto key = std::make_tuple(kind, dtype, shape, spread);
  if (auto it = buffers_.find(key); it != buffers_.end()) return it->second;
  const int64_t n = shape_numel(shape);
  std::vector<std::byte> b(*dtype_bytes(dtype, uint64_t(n)));
  const uint64_t s = stream_seed(seed_, shape, kind);
  const int64_t in = shape.size() > 1 ? shape.back() : 1;
  auto fill_f32 = [&](auto value) {
    auto* p = reinterpret_cast<float*>(b.data());
    parallel_fill(s, n, [&](SplitMix64& r, int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) p[i] = value(r);
    });
  };
  auto fill_bytes = [&](auto value) {
    auto* p = reinterpret_cast<uint8_t*>(b.data());
    parallel_fill(s, int64_t(b.size()), [&](SplitMix64& r, int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) p[i] = value(r);
    });
  };
  const float root3 = std::sqrt(3.0f);
  if (kind == "dense") {  // bf16, standard deviation 1/sqrt(fan_in)
    auto* p = reinterpret_cast<uint16_t*>(b.data());
    const float a = root3 / std::sqrt(float(in));
    parallel_fill(s, n, [&](SplitMix64& r, int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) p[i] = f32_to_bf16(a * r.symmetric());
    });
  } else if (kind == "embed") {  // bf16, standard deviation 1
    auto* p = reinterpret_cast<uint16_t*>(b.data());
    parallel_fill(s, n, [&](SplitMix64& r, int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) p[i] = f32_to_bf16(root3 * r.symmetric());
    });
  } else if (kind == "e4m3") {  // codes of spread `spread`, well inside the ±448 range
    fill_bytes([&](SplitMix64& r) { return f32_to_e4m3(root3 * spread * r.symmetric()); });
  } else if (kind == "e2m1") {  // any byte is two valid codes: spread kE2m1Rms
    fill_bytes([](SplitMix64& r) { return uint8_t(r.next() >> 56); });
  } else if (kind == "e2m1_spread") {  // pairs of nearest codes of values with spread `spread`
    fill_bytes([&](SplitMix64& r) {
      const uint8_t lo = f32_to_e2m1(root3 * spread * r.symmetric()), hi = f32_to_e2m1(root3 * spread * r.symmetric());
      return uint8_t(lo | (hi << 4));
    });
  } else if (kind == "nvfp4_scale") {  // e4m3 block scales near 1
    fill_bytes([](SplitMix64& r) { return f32_to_e4m3(1.0f + 0.25f * r.symmetric()); });
  } else if (kind == "norm") {
    fill_f32([](SplitMix64& r) { return 1.0f + 0.1f * r.symmetric(); });
  } else if (kind == "hc_fn") {
    const float a = root3 / std::sqrt(float(in));
    fill_f32([&](SplitMix64& r) { return a * r.symmetric(); });
  } else if (kind == "hc_base" || kind == "ape") {
    fill_f32([&](SplitMix64& r) { return 0.5f * root3 * r.symmetric(); });
  } else if (kind == "hc_scale") {
    fill_f32([](SplitMix64& r) { return 1.0f + 0.5f * r.symmetric(); });
  } else if (kind == "sink") {
    fill_f32([&](SplitMix64& r) { return root3 * r.symmetric(); });
  } else if (kind == "router_bias") {
    // Zeros, which tetra bench then balances as training does (routing_balance.h); a random bias
    // did the opposite (std 0.3, twice the spread of the scores it is added to: a batch of 32
    // tokens on the 20-layer V4-Flash touched 26 experts a layer where balanced routing touches ~136).
    fill_f32([](SplitMix64&) { return 0.0f; });
  } else if (kind == "tid2eid") {  // k distinct experts per token
    auto* p = reinterpret_cast<int32_t*>(b.data());
    const int64_t k = shape[1], experts = config_.n_routed_experts;
    parallel_fill(s, shape[0], [&](SplitMix64& r, int64_t t0, int64_t t1) {
      std::vector<int32_t> pool(static_cast<size_t>(experts));
      for (int64_t t = t0; t < t1; ++t) {
        for (int64_t e = 0; e < experts; ++e) pool[size_t(e)] = int32_t(e);
        for (int64_t j = 0; j < k; ++j) {  // partial Fisher-Yates
          const int64_t pick = j + int64_t(r.next() % uint64_t(experts - j));
          std::swap(pool[size_t(j)], pool[size_t(pick)]);
          p[t * k + j] = pool[size_t(j)];
        }
      }
    });
  } else {
    model_error("synthetic weights: unknown buffer kind ", kind);
  }
  return buffers_.emplace(key, std::move(b)).first->second;
}

LinearWeight SyntheticWeights::make_linear(const std::string& role, WeightFormat f, int64_t out, int64_t in) {
  LinearWeight w;
  w.role = role;
  w.format = f;
  w.out = out;
  w.in = in;
  w.sources.push_back("synthetic");
  auto view = [&](const std::string& kind, DType dtype, Shape shape, float spread = 0) {
    const auto& b = buffer(kind, dtype, shape, spread);
    return TensorView{dtype, std::move(shape), b.data(), b.size()};
  };
  // A scale tensor holding one value everywhere, shared by every tensor of its shape.
  auto constant = [&](const std::string& kind, DType dtype, Shape shape, uint8_t byte) {
    const auto key = std::make_tuple(kind + "=" + std::to_string(byte), dtype, shape, 0.0f);
    auto it = buffers_.find(key);
    if (it == buffers_.end())
      it = buffers_.emplace(key, std::vector<std::byte>(*dtype_bytes(dtype, uint64_t(shape_numel(shape))), std::byte(byte))).first;
    return TensorView{dtype, std::move(shape), it->second.data(), it->second.size()};
  };
  const float target_std = 1.0f / std::sqrt(float(in));  // the weights' spread
  switch (f) {
    case WeightFormat::dense:
      w.weight = view("dense", DType::bf16, {out, in});
      break;
    case WeightFormat::fp8_block: {
      const int e = power_of_two_exponent(target_std, 64.0f);
      w.weight = view("e4m3", DType::f8_e4m3, {out, in}, std::ldexp(target_std, -e));
      w.scale = constant("e8m0", DType::f8_e8m0, {ceil_div(out, 128), ceil_div(in, 128)}, e8m0_byte(e));
      break;
    }
    case WeightFormat::fp8_tensor: {  // the same codes and (power-of-two) scale as fp8_block
      const int e = power_of_two_exponent(target_std, 64.0f);
      w.weight = view("e4m3", DType::f8_e4m3, {out, in}, std::ldexp(target_std, -e));
      const float s = std::ldexp(1.0f, e);
      uint32_t bits;
      std::memcpy(&bits, &s, 4);
      // A per-tensor scale is one f32: keyed by its value so equal fan-ins share it.
      const auto key = std::make_tuple("f32_scale=" + std::to_string(bits), DType::f32, Shape{}, 0.0f);
      auto it = buffers_.find(key);
      if (it == buffers_.end()) {
        std::vector<std::byte> b(4);
        std::memcpy(b.data(), &s, 4);
        it = buffers_.emplace(key, std::move(b)).first;
      }
      w.scale = TensorView{DType::f32, {}, it->second.data(), 4};
      break;
    }
    case WeightFormat::mxfp4: {  // code spread 2..4 keeps clear of e2m1's ±6 limit
      const int e = int(std::floor(std::log2(target_std / 2.0f)));
      w.weight = view("e2m1_spread", DType::u8, {out, in / 2}, std::ldexp(target_std, -e));
      w.scale = constant("e8m0", DType::f8_e8m0, {out, in / 32}, e8m0_byte(e));
      break;
    }
    case WeightFormat::nvfp4:
      w.weight = view("e2m1", DType::u8, {out, in / 2});
      w.scale = view("nvfp4_scale", DType::f8_e4m3, {out, in / 16});
      w.global_scale = target_std / kE2m1Rms;
      break;
  }
  return w;
}

ParamWeight SyntheticWeights::make_param(const std::string& role, const Shape& shape, bool index) {
  const std::string kind = param_kind(role);
  const DType dtype = index ? DType::i32 : kind == "embed" ? DType::bf16 : DType::f32;
  const auto& b = buffer(kind, dtype, shape);
  return ParamWeight{role, TensorView{dtype, shape, b.data(), b.size()}, "synthetic"};
}

}  // namespace tetra::bench
