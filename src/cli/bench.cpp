// tetra bench --synthetic: a model of a published geometry with random weights in a checkpoint
// format, timed on the device against its floors (src/bench). Prints a table; --json FILE
// also writes every figure.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "bench/bench_report.h"
#include "bench/bench_runner.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "core/error.h"

namespace tetra {
namespace {

// Takes `--name v1 v2 ...` (values up to the next option) out of argv; nullopt if absent.
std::optional<std::vector<int64_t>> take_list(std::vector<std::string>& argv, const std::string& name) {
  std::optional<std::vector<int64_t>> values;
  for (size_t i = 0; i < argv.size();) {
    if (argv[i] != "--" + name) {
      ++i;
      continue;
    }
    if (values) usage_error("--", name, " given twice");
    values.emplace();
    size_t j = i + 1;
    for (; j < argv.size() && !argv[j].starts_with("--"); ++j) {
      size_t used = 0;
      long long v = -1;
      try {
        v = std::stoll(argv[j], &used);
      } catch (const std::exception&) {
      }
      if (used != argv[j].size() || v < 0) usage_error("--", name, " values must be non-negative integers, got '", argv[j], "'");
      values->push_back(v);
    }
    argv.erase(argv.begin() + ptrdiff_t(i), argv.begin() + ptrdiff_t(j));
  }
  return values;
}

}  // namespace

int run_bench(const std::vector<std::string>& argv_in) {
  std::vector<std::string> argv = argv_in;
  const auto batches = take_list(argv, "batch");
  const auto contexts = take_list(argv, "context");
  const Args args(argv, {"synthetic", "layers", "format", "prefill", "steps", "device", "seed", "json", "kv-cache-dtype",
                         "indexer-cache-dtype", "expert-parallel"},
                  {"speculative"});
  bench::BenchOptions o;
  o.geometry = args.required("synthetic");
  if (const auto n = args.count("layers")) o.layers = *n;
  o.format = bench::parse_synthetic_format(args.get_or("format", "nvfp4"));
  if (batches) o.batches = *batches;
  if (contexts) o.contexts = *contexts;
  o.prefill = args.count("prefill").value_or(0);
  o.steps = args.count("steps").value_or(o.steps);
  o.speculative = args.flag("speculative");
  o.device = args.get_or("device", "cuda");
  o.ranks = expert_parallel_option(args);
  o.seed = uint64_t(args.count("seed").value_or(1));
  o.caches = {parse_kv_cache_dtype(args.get_or("kv-cache-dtype", "fp8")),
              parse_indexer_cache_dtype(args.get_or("indexer-cache-dtype", "fp4"))};
  const auto json_path = args.get("json");
  if (json_path && !std::ofstream(*json_path)) usage_error("--json ", *json_path, ": cannot write");  // before the long run
  std::string command = "tetra bench";
  for (const auto& a : argv_in) command += " " + a;
  const std::string date = bench::utc_now();
  // The file is rewritten after every point, whole (through a rename), so it always holds
  // valid JSON of what was measured so far.
  auto write_json = [&](const bench::BenchReport& r) {
    const std::string partial = *json_path + ".partial";
    {
      std::ofstream out(partial);
      out << bench::report_json(r, command, date).dump(2) << "\n";
      if (!out) runtime_error("--json ", *json_path, ": write failed");
    }
    std::filesystem::rename(partial, *json_path);
  };
  const bench::BenchReport report =
      bench::run_bench(o, std::cerr, json_path ? std::function<void(const bench::BenchReport&)>(write_json) : nullptr);
  bench::print_report(report, std::cout);
  if (json_path) write_json(report);
  if (report.nonfinite_points > 0)
    runtime_error(report.nonfinite_points, " benchmark point(s) computed logits that are not finite (see each point's "
                  "error): this build or device computes wrong results");
  return 0;
}

}  // namespace tetra
