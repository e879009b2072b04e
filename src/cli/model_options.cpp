#include "cli/model_options.h"

#include <filesystem>
#include <iomanip>
#include <sstream>

#include "core/error.h"

namespace tetra {

std::set<std::string> model_option_names() {
  return {"model",       "device",      "kv-cache-dtype", "indexer-cache-dtype", "cache-blocks", "cache-memory-fraction",
          "max-running", "max-queued", "prefill-chunk", "speculative", "expert-parallel"};
}

SpeculativeMethod speculation_option(const Args& args) { return parse_speculative_method(args.get_or("speculative", "off")); }

int64_t positive_integer_option(const Args& args, const std::string& name, int64_t fallback) {
  const auto v = args.get(name);
  if (!v) return fallback;
  try {
    size_t used = 0;
    const long long n = std::stoll(*v, &used);
    if (used == v->size() && n > 0) return n;
  } catch (const std::exception&) {
  }
  usage_error("--", name, " must be a positive integer, got '", *v, "'");
}

int expert_parallel_option(const Args& args) {
  const int64_t ranks = positive_integer_option(args, "expert-parallel", 1);
  if (ranks > 64) usage_error("--expert-parallel ", ranks, ": at most 64 ranks");
  return int(ranks);
}

std::unique_ptr<server::ServingModel> load_serving_model(const Args& args) {
  // mistyped options fail now, not after minutes of loading
  speculation_option(args);
  const int ranks = expert_parallel_option(args);
  const std::string dir = args.get_or("model", server::kDemoModelDir);
  if (!std::filesystem::is_directory(dir))
    model_error(dir, ": no such model directory", args.get("model") ? "" : " (the demo model; pass --model DIR for another)");
  const CacheTypes caches{parse_kv_cache_dtype(args.get_or("kv-cache-dtype", "fp8")),
                          parse_indexer_cache_dtype(args.get_or("indexer-cache-dtype", "fp4"))};
  return std::make_unique<server::ServingModel>(dir, args.get_or("device", "cpu"), caches, ranks);
}

namespace {

double memory_fraction_option(const Args& args, const server::ServingModel& model) {
  const double fallback = model.backend().name() == "cpu" ? 0.5 : 0.85;
  const auto v = args.get("cache-memory-fraction");
  if (!v) return fallback;
  try {
    size_t used = 0;
    const double f = std::stod(*v, &used);
    if (used == v->size() && f > 0 && f <= 1) return f;
  } catch (const std::exception&) {
  }
  usage_error("--cache-memory-fraction must be a number in (0, 1], got '", *v, "'");
}

}  // namespace

std::unique_ptr<Scheduler> make_scheduler(const Args& args, server::ServingModel& model) {
  SchedulerOptions options;
  options.speculation = speculation_option(args);
  const bool mtp = options.speculation == SpeculativeMethod::mtp;
  if (mtp && !model.model().has_mtp())
    usage_error("--speculative mtp needs the checkpoint's MTP block (mtp.0.* tensors), which this model lacks; "
                "--speculative ngram drafts from the text instead");
  const CacheGeometry geometry(model.config(), model.caches().kv, model.caches().indexer, mtp);
  const int64_t blocks =
      args.get("cache-blocks")
          ? positive_integer_option(args, "cache-blocks", 1)
          : blocks_for_memory(geometry, double(model.free_memory_bytes_per_rank()) * memory_fraction_option(args, model));
  // A GPU takes its cache pool now, from the memory it was sized by; the CPU's grows with use,
  // as the host's memory is shared with everything else.
  if (model.backend().name() != "cpu") model.model().reserve_cache(blocks);
  options.max_running = positive_integer_option(args, "max-running", options.max_running);
  options.max_queued = positive_integer_option(args, "max-queued", options.max_queued);
  options.prefill_chunk = positive_integer_option(args, "prefill-chunk", options.prefill_chunk);
  return std::make_unique<Scheduler>(model.model(), model.backend(), geometry, blocks, options);
}

std::string describe_cache_capacity(const Scheduler& scheduler, const server::ServingModel& model) {
  const CacheGeometry& geometry = scheduler.geometry();
  const int64_t blocks = scheduler.stats().blocks_total, context = model.config().max_position_embeddings;
  std::ostringstream out;
  out << "cache pool of " << blocks << " blocks ("
      << std::fixed << std::setprecision(2) << double(blocks) * double(geometry.block_bytes()) / double(1 << 30)
      << " GiB on " << model.backend().name() << "): " << blocks / geometry.blocks_for(context) << " sequences of "
      << context << " tokens (the full context) fit";
  return out.str();
}

}  // namespace tetra
