#include "support/tiny_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "io/safetensors.h"
#include "model/config_writer.h"
#include "model/weight_roles.h"
#include "model/weights.h"

namespace tetra::testing {
namespace fs = std::filesystem;
using nlohmann::json;

ModelConfig tiny_config() {
  ModelConfig c;
  c.form = ConfigForm::legacy;
  c.vocab_size = 96;
  c.dim = 64;
  c.n_layers = 4;
  c.n_heads = 4;
  c.head_dim = 64;
  c.rope_dim = 16;
  c.q_lora_rank = 32;
  c.o_groups = 2;
  c.o_lora_rank = 32;
  c.n_routed_experts = 4;
  c.n_activated_experts = 2;
  c.n_shared_experts = 1;
  c.moe_inter_dim = 32;
  c.index_n_heads = 16;  // few heads make exact top-k ties (all ReLUs zero) common
  c.index_head_dim = 32;
  c.index_topk = 2;
  c.window = 8;
  c.route_scale = 1.5;
  c.swiglu_limit = 10;
  c.yarn = {true, 16, 256, 32, 1};
  c.max_position_embeddings = 4096;
  c.compress_ratios = {0, 4, 8, 4};
  c.hash_routed = {true, false, false, false};
  c.n_mtp_layers = 1;
  c.bos_token_id = 0;
  c.eos_token_id = 1;
  return c;
}

namespace {

// Which format each linear layer gets for a quantization scheme.
WeightFormat format_for(const std::string& role, TinyQuant q) {
  const bool dense_always = role == "head" || role.ends_with("ffn.gate") || role.find("compressor.") != std::string::npos ||
                            role.ends_with("weights_proj");
  if (q == TinyQuant::bf16 || dense_always) return WeightFormat::dense;
  const bool routed = role.find(".experts.") != std::string::npos;
  if (q == TinyQuant::fp8_mxfp4) return routed ? WeightFormat::mxfp4 : WeightFormat::fp8_block;
  if (role.ends_with("attn.wo_a")) return WeightFormat::dense;
  if (role.ends_with("attn.wq_b")) return WeightFormat::fp8_tensor;
  return WeightFormat::nvfp4;
}

class TensorWriter {
 public:
  TensorWriter(const TinyCheckpointOptions& o, size_t n_tensors)
      : o_(o), rng_(o.seed), writers_(size_t(o.shards)), per_shard_((n_tensors + size_t(o.shards) - 1) / size_t(o.shards)) {}

  // Consecutive tensors share a shard, as in published checkpoints.
  void add(const std::string& canonical, DType dtype, Shape shape, std::vector<std::byte> bytes) {
    const std::string name = family_tensor_name(canonical, o_.family);
    const size_t shard = std::min(count_++ / per_shard_, writers_.size() - 1);
    if (o_.header_only) {
      writers_[shard].add_hole(name, dtype, std::move(shape));
    } else {
      storage_.push_back(std::move(bytes));
      writers_[shard].add(name, dtype, std::move(shape), storage_.back());
    }
    shard_of_[name] = shard;
  }
  bool header_only() const { return o_.header_only; }

  std::vector<std::byte> random_floats(DType dtype, int64_t n, float scale) {
    if (o_.header_only) return {};
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<std::byte> out(size_t(n) * (dtype == DType::f32 ? 4 : 2));
    for (int64_t i = 0; i < n; ++i) {
      const float v = normal(rng_);
      if (dtype == DType::f32) {
        std::memcpy(out.data() + 4 * i, &v, 4);
      } else {
        const uint16_t b = f32_to_bf16(v);
        std::memcpy(out.data() + 2 * i, &b, 2);
      }
    }
    return out;
  }
  // Random bytes in [lo, hi] (inclusive).
  std::vector<std::byte> random_bytes(int64_t n, int lo, int hi) {
    if (o_.header_only) return {};
    std::uniform_int_distribution<int> d(lo, hi);
    std::vector<std::byte> out(static_cast<size_t>(n));
    for (auto& b : out) b = std::byte(d(rng_));
    return out;
  }
  std::mt19937_64& rng() { return rng_; }

  void write(const std::string& dir) {
    const int n = int(writers_.size());
    if (n == 1) {
      writers_[0].write((fs::path(dir) / "model.safetensors").string());
      return;
    }
    json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
    uint64_t total = 0;
    std::vector<std::string> files;
    for (int i = 0; i < n; ++i) {
      char name[64];
      std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", i + 1, n);
      files.push_back(name);
      total += writers_[size_t(i)].write((fs::path(dir) / name).string());
    }
    for (const auto& [tensor, shard] : shard_of_) index["weight_map"][tensor] = files[shard];
    index["metadata"]["total_size"] = total;
    std::ofstream(fs::path(dir) / "model.safetensors.index.json") << index.dump(2);
  }

 private:
  const TinyCheckpointOptions& o_;
  std::mt19937_64 rng_;
  std::vector<SafetensorsWriter> writers_;
  std::deque<std::vector<std::byte>> storage_;  // stable addresses for the writers' spans
  size_t per_shard_;
  std::map<std::string, size_t> shard_of_;
  size_t count_ = 0;
};

void add_linear(TensorWriter& w, const std::string& role, int64_t out, int64_t in, WeightFormat f,
                const TinyCheckpointOptions& o) {
  const float std_dev = 1.0f / std::sqrt(float(in));
  switch (f) {
    case WeightFormat::dense:
      w.add(role + ".weight", DType::bf16, {out, in}, w.random_floats(DType::bf16, out * in, std_dev));
      break;
    case WeightFormat::fp8_block:
      // e4m3 codes below 0x7F/0xFF (NaN), scales 2^-10 .. 2^-4.
      w.add(role + ".weight", DType::f8_e4m3, {out, in}, w.random_bytes(out * in, 0, 0x7E));
      w.add(role + ".scale", DType::f8_e8m0, {(out + 127) / 128, (in + 127) / 128},
            w.random_bytes(((out + 127) / 128) * ((in + 127) / 128), 117, 123));
      break;
    case WeightFormat::fp8_tensor: {
      w.add(role + ".weight", DType::f8_e4m3, {out, in}, w.random_bytes(out * in, 0, 0x7E));
      w.add(role + ".weight_scale", DType::f32, {}, w.random_floats(DType::f32, 1, std_dev / 64));
      break;
    }
    case WeightFormat::mxfp4: {
      const Shape shape = o.fp4_storage == DType::f4_e2m1 ? Shape{out, in} : Shape{out, in / 2};
      w.add(role + ".weight", o.fp4_storage, shape, w.random_bytes(out * in / 2, 0, 255));
      w.add(role + ".scale", DType::f8_e8m0, {out, in / 32}, w.random_bytes(out * in / 32, 120, 126));
      break;
    }
    case WeightFormat::nvfp4: {
      w.add(role + ".weight", DType::u8, {out, in / 2}, w.random_bytes(out * in / 2, 0, 255));
      w.add(role + ".weight_scale", DType::f8_e4m3, {out, in / 16}, w.random_bytes(out * in / 16, 0x20, 0x50));
      for (const char* name : {".weight_scale_2", ".input_scale"}) {
        std::vector<std::byte> b = w.random_floats(DType::f32, 1, std_dev / 448);
        if (!b.empty()) {  // a scale must be positive
          float s;
          std::memcpy(&s, b.data(), 4);
          s = std::fabs(s) + std_dev / 4096;
          std::memcpy(b.data(), &s, 4);
        }
        w.add(role + name, DType::f32, {}, b);
      }
      break;
    }
  }
}

}  // namespace

void write_tiny_checkpoint(const std::string& dir, const TinyCheckpointOptions& o) {
  fs::create_directories(dir);
  const ModelConfig c = o.config.value_or(tiny_config());
  const auto roles = expected_roles(c, o.with_mtp);
  size_t n_tensors = 0;
  for (const auto& e : roles) {
    if (e.kind != RoleKind::linear) n_tensors += e.optional ? 0 : 1;
    else n_tensors += format_for(e.role, o.quant) == WeightFormat::nvfp4 ? 4 : format_for(e.role, o.quant) == WeightFormat::dense ? 1 : 2;
  }
  TensorWriter w(o, n_tensors);
  std::map<std::string, bool> fused_done;
  for (const auto& e : roles) {
    if (e.kind == RoleKind::index && w.header_only()) {
      w.add(e.role, DType::i64, e.shape, {});
    } else if (e.kind == RoleKind::index) {
      std::uniform_int_distribution<int64_t> d(0, c.n_routed_experts - 1);
      std::vector<std::byte> b(size_t(shape_numel(e.shape)) * 8);
      for (size_t i = 0; i < b.size() / 8; ++i) {
        const int64_t v = d(w.rng());
        std::memcpy(b.data() + 8 * i, &v, 8);
      }
      w.add(e.role, DType::i64, e.shape, std::move(b));
    } else if (e.kind == RoleKind::param) {
      const bool f32 = e.role.find("hc_") != std::string::npos || e.role.ends_with("attn_sink") ||
                       e.role.ends_with("ape") || e.role.ends_with("gate.bias");
      if (e.optional) continue;  // a hash layer's unused router bias
      const DType dt = f32 ? DType::f32 : DType::bf16;
      w.add(e.role, dt, e.shape, w.random_floats(dt, shape_numel(e.shape), e.role.ends_with("norm.weight") ? 0.1f : 0.5f));
    } else if (o.fused_experts && e.role.find(".experts.") != std::string::npos) {
      const std::string ffn = e.role.substr(0, e.role.find(".experts.") + 1);
      if (fused_done[ffn]) continue;
      fused_done[ffn] = true;
      const int64_t E = c.n_routed_experts, I = c.moe_inter_dim, H = c.dim;
      w.add(ffn + "experts.gate_up_proj", DType::bf16, {E, 2 * I, H}, w.random_floats(DType::bf16, E * 2 * I * H, 0.1f));
      w.add(ffn + "experts.down_proj", DType::bf16, {E, H, I}, w.random_floats(DType::bf16, E * H * I, 0.1f));
    } else {
      add_linear(w, e.role, e.shape[0], e.shape[1], format_for(e.role, o.quant), o);
    }
  }
  w.write(dir);
  ModelConfig written = c;
  if (o.quant == TinyQuant::fp8_mxfp4 && o.family == NameFamily::official) written.quant = {"fp8", "", "fp4"};
  if (o.quant == TinyQuant::nvfp4 && o.family != NameFamily::official) written.quant = {"modelopt", "MIXED_PRECISION", ""};
  std::ofstream(fs::path(dir) / "config.json")
      << model_config_json(written, o.family == NameFamily::official ? ConfigForm::legacy : ConfigForm::transformers);
  if (o.quant == TinyQuant::nvfp4 && o.family != NameFamily::official)
    std::ofstream(fs::path(dir) / "hf_quant_config.json")
        << json{{"producer", {{"name", "modelopt"}}},
                {"quantization", {{"quant_algo", "MIXED_PRECISION"}, {"group_size", 16}}}}
               .dump(2);
}

}  // namespace tetra::testing
