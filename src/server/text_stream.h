#pragma once
// One request's output as text: tokens arrive on the scheduler's thread, are detokenized
// (never splitting a character) and checked against the stop strings; the request's own thread
// takes what has arrived with wait(). Used by the server and by `tetra generate`.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/scheduler.h"
#include "text/detokenizer.h"
#include "text/stop_matcher.h"

namespace tetra::server {

// Rung by the streams of one request (its n choices) whenever any of them has something new, so
// that one thread can wait on all of them.
class Doorbell {
 public:
  void ring();
  uint64_t rings() const;
  // Waits up to `timeout` for a ring after the `seen`-th.
  void wait(uint64_t seen, std::chrono::milliseconds timeout) const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable rung_;
  uint64_t rings_ = 0;
};

class TextStream : public TokenSink {
 public:
  using Clock = std::chrono::steady_clock;
  // Called on the scheduler's thread for every token with the time since the previous one
  // (or since the request started, for the first).
  using TokenTiming = std::function<void(bool first, double seconds)>;

  TextStream(const text::Tokenizer& tokenizer, std::vector<std::string> stops, TokenTiming timing = {},
             std::shared_ptr<Doorbell> doorbell = nullptr);

  bool on_token(const SampledToken& token) override;
  void on_finish(FinishReason reason, const std::string& error) override;

  struct Update {
    std::vector<SampledToken> tokens;  // new tokens, in order
    std::string text;                  // new text (stop strings removed)
    bool finished = false;
    FinishReason reason = FinishReason::stop;
    std::string error;
  };
  // What arrived since the last call; waits up to `timeout` for something to arrive.
  Update wait(std::chrono::milliseconds timeout);

  // The reader is gone: the sequence ends at its next token.
  void abandon();

 private:
  TokenTiming timing_;
  std::shared_ptr<Doorbell> doorbell_;
  text::IncrementalDetokenizer detokenizer_;
  text::StopMatcher stops_;
  Clock::time_point last_ = Clock::now();
  bool any_token_ = false;

  std::mutex mutex_;
  std::condition_variable arrived_;
  Update pending_;
  bool abandoned_ = false;
};

}  // namespace tetra::server
