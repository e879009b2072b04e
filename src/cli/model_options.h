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

// --model DIR (default: the demo model), --device, --kv-cache-dtype, --indexer-cache-dtype.
std::unique_ptr<server::ServingModel> load_serving_model(const Args& args);

// A scheduler over the model: --cache-blocks N (default: half the available memory),
// --max-running N, --max-queued N, --prefill-chunk N.
std::unique_ptr<Scheduler> make_scheduler(const Args& args, server::ServingModel& model);

int64_t positive_integer_option(const Args& args, const std::string& name, int64_t fallback);

}  // namespace tetra
