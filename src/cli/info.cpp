// tetra info: what a checkpoint holds and what serving it costs, read from headers only.
#include <cstdio>
#include <iostream>
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/kv_layout.h"
#include "model/weights.h"

namespace tetra {
namespace {

// Binary units, two decimals: "148.65 GiB", "1.01 MiB".
std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", v, units[u]);
  return buf;
}

const char* kind_name(AttentionKind k) {
  return k == AttentionKind::sliding ? "sliding" : k == AttentionKind::csa ? "csa" : "hca";
}

}  // namespace

int run_info(const std::vector<std::string>& argv) {
  const Args args(argv, {"model", "kv-cache-dtype", "indexer-cache-dtype"}, {"json", "summary"});
  const std::string dir = args.required("model");
  const KvCacheDtype kv = parse_kv_cache_dtype(args.get_or("kv-cache-dtype", "fp8"));
  const IndexerCacheDtype idx = parse_indexer_cache_dtype(args.get_or("indexer-cache-dtype", "fp4"));

  const ModelConfig config = load_model_config(dir);
  const TensorStore store(dir);
  const ModelWeights weights(config, store);

  uint64_t file_bytes = 0, tensor_bytes = 0, elements = 0;
  for (const auto& f : store.files()) {
    file_bytes += f->file_size();
    for (const auto& e : f->entries()) {
      tensor_bytes += e.end - e.begin;
      elements += uint64_t(shape_numel(e.shape));
    }
  }
  struct FormatTotal {
    uint64_t layers = 0, bytes = 0;
  };
  std::map<std::string, FormatTotal> by_format;
  for (const auto* l : weights.linears()) {
    auto& t = by_format[weight_format_name(l->format)];
    t.layers++;
    t.bytes += l->bytes();
  }
  // what --expert-parallel splits over ranks
  uint64_t routed_expert_bytes = 0;
  for (const auto* l : weights.linears())
    if (l->role.find(".ffn.experts.") != std::string::npos) routed_expert_bytes += l->bytes();
  // A rank's weights under --expert-parallel `ranks`: every other weight and the largest share of
  // each layer's experts.
  auto rank_bytes = [&](int64_t ranks) {
    const int64_t experts = std::max<int64_t>(config.n_routed_experts, 1);
    return weights.total_bytes() - routed_expert_bytes +
           routed_expert_bytes / uint64_t(experts) * uint64_t((experts + ranks - 1) / ranks);
  };
  std::map<std::string, FormatTotal> params_by_dtype;
  for (const auto* p : weights.params()) {
    auto& t = params_by_dtype[std::string(dtype_name(p->view.dtype))];
    t.layers++;
    t.bytes += p->view.nbytes;
  }

  struct KindTotal {
    int64_t layers = 0;
    double per_token = 0;
    int64_t per_sequence = 0;
  };
  std::map<std::string, KindTotal> kv_by_kind;
  double kv_per_token = 0;
  int64_t kv_per_sequence = 0;
  for (int64_t i = 0; i < config.n_layers; ++i) {
    const auto b = layer_kv_bytes(config, i, kv, idx);
    auto& k = kv_by_kind[kind_name(config.attention_kind(i))];
    k.layers++;
    k.per_token = b.per_token;
    k.per_sequence = b.per_sequence;
    kv_per_token += b.per_token;
    kv_per_sequence += b.per_sequence;
  }
  const double kv_1m = kv_per_token * double(1 << 20) + double(kv_per_sequence);

  if (args.flag("json")) {
    nlohmann::json j;
    j["files"] = store.files().size();
    j["file_bytes"] = file_bytes;
    j["tensors"] = store.names().size();
    j["elements"] = elements;
    j["tensor_bytes"] = tensor_bytes;
    j["weight_bytes"] = weights.total_bytes();
    j["linear_layers"] = weights.linears().size();
    j["params"] = weights.params().size();
    j["mtp"] = weights.has_mtp();
    j["routed_expert_bytes"] = routed_expert_bytes;
    for (const int64_t ranks : {2, 4, 8})
      if (ranks <= config.n_routed_experts) j["weight_bytes_per_rank"][std::to_string(ranks)] = rank_bytes(ranks);
    for (const auto& [name, t] : by_format) j["formats"][name] = {{"layers", t.layers}, {"bytes", t.bytes}};
    for (const auto& [name, k] : kv_by_kind)
      j["kv"][name] = {{"layers", k.layers}, {"bytes_per_token", k.per_token}, {"bytes_per_sequence", k.per_sequence}};
    j["kv_bytes_per_token"] = kv_per_token;
    j["kv_bytes_per_1m_sequence"] = kv_1m;
    std::cout << j.dump(2) << "\n";
    return 0;
  }

  std::printf("model            %s\n", dir.c_str());
  std::cout << config.summary();
  std::printf("files            %zu safetensors, %s on disk\n", store.files().size(), human_bytes(file_bytes).c_str());
  std::printf("tensors          %zu (%llu elements, %s of tensor data)%s\n", store.names().size(),
              (unsigned long long)elements, human_bytes(tensor_bytes).c_str(), weights.has_mtp() ? ", MTP present" : config.n_mtp_layers ? ", MTP weights absent" : "");
  if (!args.flag("summary")) {
    std::printf("\n%-48s %-10s %-8s %-16s %14s  %s\n", "role", "format", "dtype", "shape", "bytes", "checkpoint tensors");
    for (const auto* l : weights.linears()) {
      std::string sources;
      for (const auto& s : l->sources) sources += (sources.empty() ? "" : ", ") + s;
      std::printf("%-48s %-10s %-8s %-16s %14llu  %s\n", l->role.c_str(), weight_format_name(l->format),
                  std::string(dtype_name(l->weight.dtype)).c_str(), shape_str({l->out, l->in}).c_str(),
                  (unsigned long long)l->bytes(), sources.c_str());
    }
    for (const auto* p : weights.params())
      std::printf("%-48s %-10s %-8s %-16s %14llu  %s\n", p->role.c_str(), "param",
                  std::string(dtype_name(p->view.dtype)).c_str(), shape_str(p->view.shape).c_str(),
                  (unsigned long long)p->view.nbytes, p->source.c_str());
  }
  std::printf("\nweight memory by format\n");
  for (const auto& [name, t] : by_format)
    std::printf("  %-12s %8llu linear layers  %s\n", name.c_str(), (unsigned long long)t.layers, human_bytes(t.bytes).c_str());
  for (const auto& [name, t] : params_by_dtype)
    std::printf("  %-12s %8llu other tensors  %s\n", ("param " + name).c_str(), (unsigned long long)t.layers,
                human_bytes(t.bytes).c_str());
  std::printf("  total weight memory         %s (%llu bytes)\n", human_bytes(weights.total_bytes()).c_str(),
              (unsigned long long)weights.total_bytes());
  std::printf("  routed experts              %s; a rank's weights under --expert-parallel", human_bytes(routed_expert_bytes).c_str());
  const char* separator = " ";
  for (const int64_t ranks : {2, 4, 8})
    if (ranks <= config.n_routed_experts) {
      std::printf("%s%lld: %s", separator, (long long)ranks, human_bytes(rank_bytes(ranks)).c_str());
      separator = ", ";
    }
  std::printf("\n");
  std::printf("\nKV cache (kv %s, indexer %s)\n", args.get_or("kv-cache-dtype", "fp8").c_str(),
              args.get_or("indexer-cache-dtype", "fp4").c_str());
  std::printf("  entry            %lld bytes KV, %lld bytes indexer key\n", (long long)kv_entry_bytes(config, kv),
              (long long)indexer_entry_bytes(config, idx));
  for (const auto& [name, k] : kv_by_kind)
    std::printf("  %-8s %3lld layers  %10.3f bytes/token/layer  %8lld bytes/sequence/layer (window)\n", name.c_str(),
                (long long)k.layers, k.per_token, (long long)k.per_sequence);
  std::printf("  all layers       %.1f bytes/token + %lld bytes/sequence; a 1M-token sequence: %s\n", kv_per_token,
              (long long)kv_per_sequence, human_bytes(uint64_t(kv_1m)).c_str());
  return 0;
}

}  // namespace tetra
