#pragma once
// Options that `tetra generate` and `tetra serve` share: which model, where it runs, and how
// the scheduler sizes its cache pool and batch.
#include <memory>
#include <set>
#include <string>

#include "cli/args.h"
#include "runtime/scheduler.h"
#include "server/serving_model.h"

namespace tetra {

// The valued options read by the functions below.
std::set<std::string> model_option_names();

// --model DIR (default: the demo model), --device, --kv-cache-dtype, --indexer-cache-dtype,
// --expert-parallel N (the routed experts split over N backends of the device; default 1).
std::unique_ptr<server::ServingModel> load_serving_model(const Args& args);

// --speculative off|mtp|ngram (default off).
SpeculativeMethod speculation_option(const Args& args);

// A scheduler over the model: --cache-blocks N, or by default the blocks that fit in
// --cache-memory-fraction F of the memory left once the weights are in (0.5 of the host's on
// the CPU, 0.85 of the device's on a GPU); --max-running N, --max-queued N, --prefill-chunk N,
// and the speculation options.
std::unique_ptr<Scheduler> make_scheduler(const Args& args, server::ServingModel& model);

// One line for start-up: the cache pool's size and how many sequences of the model's full
// context it holds.
std::string describe_cache_capacity(const Scheduler& scheduler, const server::ServingModel& model);

int64_t positive_integer_option(const Args& args, const std::string& name, int64_t fallback);

// --expert-parallel N: 1 (default) to 64 ranks.
int expert_parallel_option(const Args& args);

}  // namespace tetra
