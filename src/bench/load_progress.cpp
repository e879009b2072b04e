#include "bench/load_progress.h"

#include <cstdio>

#include "bench/device_measure.h"

namespace tetra::bench {

LoadProgress::LoadProgress(std::ostream& out, std::string device, uint64_t expected_bytes, std::chrono::seconds every)
    : out_(out),
      device_(std::move(device)),
      expected_(expected_bytes),
      baseline_(device_memory_used(device_).value_or(0)),
      every_(every),
      start_(std::chrono::steady_clock::now()),
      thread_([this] { run(); }) {}

LoadProgress::~LoadProgress() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void LoadProgress::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, every_, [this] { return done_; })) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    char line[160];
    if (const auto used = device_memory_used(device_)) {
      const double loaded = double(*used > baseline_ ? *used - baseline_ : 0);
      std::snprintf(line, sizeof line, "loading weights: %.1f of %.1f GB on the device (%.0f%%), %.0f s", loaded / 1e9,
                    double(expected_) / 1e9, 100.0 * loaded / double(expected_), seconds);
    } else {
      std::snprintf(line, sizeof line, "loading weights: %.1f GB, %.0f s", double(expected_) / 1e9, seconds);
    }
    out_ << line << std::endl;
  }
}

}  // namespace tetra::bench
