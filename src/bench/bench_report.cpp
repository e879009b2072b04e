#include "bench/bench_report.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <optional>

#include "model/kv_layout.h"

namespace tetra::bench {
namespace {

using nlohmann::json;

const char* kv_name(KvCacheDtype t) { return t == KvCacheDtype::fp8 ? "fp8" : t == KvCacheDtype::bf16 ? "bf16" : "f32"; }
const char* indexer_name(IndexerCacheDtype t) {
  return t == IndexerCacheDtype::fp4 ? "fp4" : t == IndexerCacheDtype::bf16 ? "bf16" : "f32";
}

// Seconds the decode point's bytes take at the measured copy bandwidth.
double floor_seconds(const BenchReport& r, const DecodeResult& d) { return d.floor_bytes.total() / r.ceilings.copy_bytes_per_s; }
// The same with the experts the point's routing touched (where it was measured).
std::optional<double> measured_floor_seconds(const BenchReport& r, const DecodeResult& d) {
  if (!d.measured_floor_bytes) return std::nullopt;
  return d.measured_floor_bytes->total() / r.ceilings.copy_bytes_per_s;
}

const DecodeResult* find_point(const BenchReport& r, int64_t batch, int64_t context) {
  for (const auto& d : r.decode)
    if (d.batch == batch && d.context == context && d.error.empty()) return &d;
  return nullptr;
}

// The headline figures of issue 8 this run measures: decode at the first context, prefill. Beside
// the step-time ratio of batch 32 to batch 1, the ratio of their byte floors: how much more a
// batch-32 step must read (the experts its tokens touch), so what ratio the memory allows.
json headline(const BenchReport& r) {
  json h = {{"decode_context", nullptr},     {"decode_b1_step_over_floor", nullptr},
            {"decode_b32_over_b1", nullptr}, {"decode_b32_floor_over_b1_floor", nullptr},
            {"decode_b32_measured_floor_over_b1_floor", nullptr},
            {"prefill_tokens", nullptr},     {"prefill_bf16_rate_fraction", nullptr}};
  if (!r.options.contexts.empty()) {
    const int64_t ctx = r.options.contexts.front();
    h["decode_context"] = ctx;
    const DecodeResult* b1 = find_point(r, 1, ctx);
    const DecodeResult* b32 = find_point(r, 32, ctx);
    if (b1) h["decode_b1_step_over_floor"] = b1->median_seconds() / floor_seconds(r, *b1);
    if (b1 && b32) {
      h["decode_b32_over_b1"] = b32->median_seconds() / b1->median_seconds();
      h["decode_b32_floor_over_b1_floor"] = floor_seconds(r, *b32) / floor_seconds(r, *b1);
      const auto m1 = measured_floor_seconds(r, *b1), m32 = measured_floor_seconds(r, *b32);
      if (m1 && m32) h["decode_b32_measured_floor_over_b1_floor"] = *m32 / *m1;
    }
  }
  if (r.prefill && r.prefill->error.empty() && r.ceilings.matrix_flops_per_s) {
    h["prefill_tokens"] = r.prefill->tokens;
    h["prefill_bf16_rate_fraction"] = r.prefill->flops.total() / r.prefill->median_seconds() / *r.ceilings.matrix_flops_per_s;
  }
  return h;
}

json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

}  // namespace

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char s[32];
  std::strftime(s, sizeof s, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return s;
}

json report_json(const BenchReport& r, const std::string& command, const std::string& date) {
  const auto& o = r.options;
  json j;
  j["command"] = command;
  j["date"] = date;
  j["device"] = {{"kind", o.device}, {"name", r.device.name},
                 {"memory_bytes", r.device.memory ? json(*r.device.memory) : json(nullptr)},
                 {"kernel_launches", r.device.kernel_launches.empty() ? json(nullptr) : json(r.device.kernel_launches)}};
  j["geometry"] = o.geometry;
  j["layers"] = r.config.n_layers;
  j["format"] = synthetic_format_name(o.format);
  j["caches"] = {{"kv", kv_name(o.caches.kv)}, {"indexer", indexer_name(o.caches.indexer)}};
  j["expert_parallel"] = o.ranks;
  j["weights"] = {{"device_bytes", r.weight_bytes}, {"largest_rank_device_bytes", r.rank_weight_bytes}, {"host_bytes", r.host_bytes},
                  {"generate_seconds", r.generate_seconds}, {"load_seconds", r.load_seconds}};
  j["ceilings"] = {{"copy_bytes_per_s", r.ceilings.copy_bytes_per_s}, {"copy_method", r.ceilings.copy_method},
                   {"bf16_matrix_flops_per_s", optional_number(r.ceilings.matrix_flops_per_s)},
                   {"matrix_method", r.ceilings.matrix_method}};
  j["routing_balance"] = {{"steps", r.routing.steps},
                          {"tokens", r.routing.tokens},
                          {"busiest_expert_over_mean_before", r.routing.busiest_before},
                          {"busiest_expert_over_mean_after", r.routing.busiest_after}};
  j["decode"] = json::array();
  for (const auto& d : r.decode) {
    json p = {{"batch", d.batch},
              {"context", d.context},
              {"floor", {{"weight_bytes", d.floor_bytes.weights},
                         {"kv_bytes", d.floor_bytes.kv},
                         {"expected_experts_per_layer", d.floor_bytes.experts_per_layer},
                         {"seconds", floor_seconds(r, d)}}}};
    const auto measured = measured_floor_seconds(r, d);
    p["floor"]["measured_experts_per_layer"] = measured ? json(d.measured_floor_bytes->experts_per_layer) : json(nullptr);
    p["floor"]["measured_weight_bytes"] = measured ? json(d.measured_floor_bytes->weights) : json(nullptr);
    p["floor"]["measured_seconds"] = measured ? json(*measured) : json(nullptr);
    if (d.error.empty()) {
      const double s = d.median_seconds();
      p["step_seconds"] = s;
      p["samples"] = d.step_seconds;
      p["tokens_per_s"] = double(d.batch) / s;
      p["step_over_floor"] = s / floor_seconds(r, d);
      p["step_over_measured_floor"] = measured ? json(s / *measured) : json(nullptr);
      p["logits_digest"] = digest_hex(d.logits_digest);
      p["error"] = nullptr;
      if (r.options.speculative) {
        // A speculative step (input and draft) over a plain one: drafts pay once more than
        // (ratio - 1) of them are taken.
        const bool timed = !d.speculative_step_seconds.empty();
        p["speculative_step_seconds"] = timed ? json(d.speculative_median_seconds()) : json(nullptr);
        p["speculative_samples"] = d.speculative_step_seconds;
        p["speculative_step_over_step"] = timed ? json(d.speculative_median_seconds() / s) : json(nullptr);
        p["speculative_error"] = d.speculative_error.empty() ? json(nullptr) : json(d.speculative_error);
      }
    } else {
      p["step_seconds"] = nullptr;
      p["error"] = d.error;
    }
    j["decode"].push_back(p);
  }
  j["prefill"] = nullptr;
  if (r.prefill) {
    const auto& p = *r.prefill;
    json q = {{"tokens", p.tokens},
              {"flops", {{"linear", p.flops.linear}, {"attention", p.flops.attention}, {"indexer", p.flops.indexer},
                         {"total", p.flops.total()}}}};
    q["floor_seconds"] = r.ceilings.matrix_flops_per_s ? json(p.flops.total() / *r.ceilings.matrix_flops_per_s) : json(nullptr);
    if (p.error.empty()) {
      const double s = p.median_seconds();
      q["seconds"] = s;
      q["samples"] = p.seconds;
      q["tokens_per_s"] = double(p.tokens) / s;
      q["bf16_rate_fraction"] = r.ceilings.matrix_flops_per_s ? json(p.flops.total() / s / *r.ceilings.matrix_flops_per_s)
                                                              : json(nullptr);
      q["logits_digest"] = digest_hex(p.logits_digest);
      q["error"] = nullptr;
    } else {
      q["seconds"] = nullptr;
      q["error"] = p.error;
    }
    j["prefill"] = q;
  }
  const auto& k = r.capacity;
  j["kv_capacity"] = {{"tokens", k.tokens},
                      {"bytes_per_sequence", k.bytes_per_sequence},
                      {"bytes_per_sequence_benchmarked_layers", k.bytes_per_sequence_benchmarked},
                      {"model_weight_bytes", k.model_weight_bytes},
                      {"routed_expert_bytes", k.routed_expert_bytes},
                      {"gpu_memory_bytes", k.gpu_memory ? json(*k.gpu_memory) : json(nullptr)},
                      {"sequences_one_gpu", k.one_gpu ? json(*k.one_gpu) : json(nullptr)},
                      {"sequences_two_gpus", k.two_gpus ? json(*k.two_gpus) : json(nullptr)}};
  j["headline"] = headline(r);
  return j;
}

void print_report(const BenchReport& r, std::ostream& out) {
  char line[256];
  std::snprintf(line, sizeof line, "%s, %lld layers, %s weights (%.2f GB), caches: KV %s, indexer %s\n",
                r.options.geometry.c_str(), (long long)r.config.n_layers, synthetic_format_name(r.options.format),
                double(r.weight_bytes) / 1e9, kv_name(r.options.caches.kv), indexer_name(r.options.caches.indexer));
  out << line;
  if (r.options.ranks > 1) {
    std::snprintf(line, sizeof line, "expert parallelism: %d ranks, the largest holding %.2f GB; floors are that rank's bytes\n",
                  r.options.ranks, double(r.rank_weight_bytes) / 1e9);
    out << line;
  }
  std::snprintf(line, sizeof line, "device %s: copy %.0f GB/s (read + write)", r.device.name.c_str(),
                r.ceilings.copy_bytes_per_s / 1e9);
  out << line;
  if (r.ceilings.matrix_flops_per_s) {
    std::snprintf(line, sizeof line, ", bf16 matrix %.0f TFLOP/s", *r.ceilings.matrix_flops_per_s / 1e12);
    out << line;
  }
  if (!r.device.kernel_launches.empty()) out << "; " << r.device.kernel_launches << " kernel launches";
  out << "\n\n";
  if (!r.decode.empty()) {
    std::snprintf(line, sizeof line, "%6s %9s %12s %12s %12s %12s %12s %8s %8s %10s\n", "batch", "context", "step ms",
                  "tokens/s", "weight MB", "KV MB", "floor ms", "x floor", "experts", "x measured");
    out << line;
    for (const auto& d : r.decode) {
      const double floor_ms = floor_seconds(r, d) * 1e3;
      if (d.error.empty()) {
        const double ms = d.median_seconds() * 1e3;
        // experts: touched a layer by the point's routing; x measured: the step over the floor they give
        const auto measured = measured_floor_seconds(r, d);
        std::snprintf(line, sizeof line, "%6lld %9lld %12.3f %12.1f %12.1f %12.1f %12.3f %8.2f %8.1f %10.2f\n",
                      (long long)d.batch, (long long)d.context, ms, double(d.batch) / ms * 1e3,
                      d.floor_bytes.weights / 1e6, d.floor_bytes.kv / 1e6, floor_ms, ms / floor_ms,
                      measured ? d.measured_floor_bytes->experts_per_layer : 0.0, measured ? ms / (*measured * 1e3) : 0.0);
      } else {
        std::snprintf(line, sizeof line, "%6lld %9lld %12s %12s %12.1f %12.1f %12.3f %8s %8s %10s  %s\n", (long long)d.batch,
                      (long long)d.context, "-", "-", d.floor_bytes.weights / 1e6, d.floor_bytes.kv / 1e6, floor_ms, "-",
                      "-", "-", d.error.substr(0, 80).c_str());
      }
      out << line;
    }
    for (const auto& d : r.decode) {
      if (!r.options.speculative || !d.error.empty()) continue;
      if (d.speculative_step_seconds.empty()) {
        std::snprintf(line, sizeof line, "two tokens a sequence, batch %lld context %lld: failed: %s\n", (long long)d.batch,
                      (long long)d.context, d.speculative_error.substr(0, 100).c_str());
      } else {
        const double ratio = d.speculative_median_seconds() / d.median_seconds();
        char pays[64] = "drafts never pay";
        if (ratio < 2) std::snprintf(pays, sizeof pays, "drafts pay once more than %.0f%% are taken", 100.0 * (ratio - 1));
        std::snprintf(line, sizeof line, "two tokens a sequence, batch %lld context %lld: %.3f ms a step, %.2fx a step's: %s\n",
                      (long long)d.batch, (long long)d.context, d.speculative_median_seconds() * 1e3, ratio, pays);
      }
      out << line;
    }
    out << "\n";
  }
  if (r.prefill) {
    const auto& p = *r.prefill;
    if (p.error.empty()) {
      const double s = p.median_seconds();
      std::snprintf(line, sizeof line, "prefill %lld tokens: %.3f s, %.0f tokens/s, %.2f TFLOP", (long long)p.tokens, s,
                    double(p.tokens) / s, p.flops.total() / 1e12);
      out << line;
      if (r.ceilings.matrix_flops_per_s) {
        std::snprintf(line, sizeof line, ", %.1f%% of the bf16 matrix rate", 100.0 * p.flops.total() / s / *r.ceilings.matrix_flops_per_s);
        out << line;
      }
      out << "\n";
    } else {
      out << "prefill " << p.tokens << " tokens: " << p.error << "\n";
    }
  }
  const auto& k = r.capacity;
  std::snprintf(line, sizeof line, "KV per %lld-token sequence: %.3f GB (all %s layers), %.3f GB (benchmarked layers)\n",
                (long long)k.tokens, double(k.bytes_per_sequence) / 1e9, r.options.geometry.c_str(),
                double(k.bytes_per_sequence_benchmarked) / 1e9);
  out << line;
  if (k.gpu_memory) {
    std::snprintf(line, sizeof line,
                  "beside the whole model's %.1f GB of weights: %lld such sequences on one GPU of %.1f GB, %lld on two "
                  "(--expert-parallel 2: each holds %.1f GB of weights and every sequence's state)\n",
                  double(k.model_weight_bytes) / 1e9, (long long)*k.one_gpu, double(*k.gpu_memory) / 1e9, (long long)*k.two_gpus,
                  double(k.model_weight_bytes - k.routed_expert_bytes / 2) / 1e9);
    out << line;
  }
}

}  // namespace tetra::bench
