#pragma once
// Progress of a long weight load that happens inside one call (the Model constructor): a
// background thread prints, every few seconds, the elapsed time and (on a GPU) how much of the
// expected device memory is in use so far.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

namespace tetra::bench {

class LoadProgress {
 public:
  // `expected_bytes`: what the load will take on the device; `device` as for make_backend.
  LoadProgress(std::ostream& out, std::string device, uint64_t expected_bytes, std::chrono::seconds every);
  ~LoadProgress();  // stops the thread
  LoadProgress(const LoadProgress&) = delete;
  LoadProgress& operator=(const LoadProgress&) = delete;

 private:
  void run();

  std::ostream& out_;
  const std::string device_;
  const uint64_t expected_, baseline_;
  const std::chrono::seconds every_;
  const std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace tetra::bench
