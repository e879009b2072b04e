#include "server/metrics.h"

#include <algorithm>
#include <sstream>

namespace tetra::server {

void Histogram::observe(double value) {
  const size_t bucket = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

void Histogram::write(std::string& out, const std::string& name, const std::string& help) const {
  std::ostringstream os;
  os << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    os << name << "_bucket{le=\"" << bounds_[i] << "\"} " << cumulative << '\n';
  }
  os << name << "_bucket{le=\"+Inf\"} " << count_ << '\n' << name << "_sum " << sum_ << '\n' << name << "_count " << count_ << '\n';
  out += os.str();
}

Metrics::Metrics()
    : time_to_first_token_({0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      inter_token_latency_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}) {}

void Metrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard lock(mutex_);
  ++requests_[{endpoint, status}];
}

void Metrics::count_tokens(int64_t prompt, int64_t generated) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += uint64_t(prompt);
  generated_tokens_ += uint64_t(generated);
}

void Metrics::observe_token(bool first, double seconds) {
  std::lock_guard lock(mutex_);
  (first ? time_to_first_token_ : inter_token_latency_).observe(seconds);
}

std::string Metrics::render(const Scheduler::Stats& s) const {
  std::lock_guard lock(mutex_);
  std::ostringstream os;
  os << "# HELP tetra_requests_total Requests answered, by endpoint and HTTP status.\n# TYPE tetra_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    os << "tetra_requests_total{endpoint=\"" << key.first << "\",status=\"" << key.second << "\"} " << n << '\n';
  os << "# HELP tetra_prompt_tokens_total Prompt tokens of finished requests.\n# TYPE tetra_prompt_tokens_total counter\n"
     << "tetra_prompt_tokens_total " << prompt_tokens_ << '\n'
     << "# HELP tetra_generation_tokens_total Generated tokens of finished requests.\n# TYPE tetra_generation_tokens_total counter\n"
     << "tetra_generation_tokens_total " << generated_tokens_ << '\n'
     << "# HELP tetra_requests_running Sequences in the running batch.\n# TYPE tetra_requests_running gauge\n"
     << "tetra_requests_running " << s.running << '\n'
     << "# HELP tetra_requests_queued Requests waiting for cache blocks.\n# TYPE tetra_requests_queued gauge\n"
     << "tetra_requests_queued " << s.queued << '\n'
     << "# HELP tetra_cache_blocks_in_use Cache blocks reserved by sequences.\n# TYPE tetra_cache_blocks_in_use gauge\n"
     << "tetra_cache_blocks_in_use " << s.blocks_in_use << '\n'
     << "# HELP tetra_cache_blocks_total Cache blocks in the pool.\n# TYPE tetra_cache_blocks_total gauge\n"
     << "tetra_cache_blocks_total " << s.blocks_total << '\n'
     << "# HELP tetra_speculative_draft_tokens_total Draft tokens fed to decode steps (--speculative).\n"
     << "# TYPE tetra_speculative_draft_tokens_total counter\n"
     << "tetra_speculative_draft_tokens_total " << s.draft_tokens << '\n'
     << "# HELP tetra_speculative_accepted_tokens_total Draft tokens equal to the token sampled before them.\n"
     << "# TYPE tetra_speculative_accepted_tokens_total counter\n"
     << "tetra_speculative_accepted_tokens_total " << s.accepted_draft_tokens << '\n';
  std::string out = os.str();
  time_to_first_token_.write(out, "tetra_time_to_first_token_seconds", "Time from request to its first token.");
  inter_token_latency_.write(out, "tetra_inter_token_latency_seconds", "Time between consecutive tokens of a request.");
  return out;
}

}  // namespace tetra::server
