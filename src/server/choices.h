#pragma once
// The n choices of one request: a sequence and a text stream each, submitted together (admitted
// all or none), read together through one doorbell, and cancelled together.
#include <chrono>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/scheduler.h"
#include "server/openai_request.h"
#include "server/text_stream.h"

namespace tetra::server {

class Choices {
 public:
  // Submits a choice's sequence, or throws (an ApiError) when it is not admitted.
  using Submit = std::function<uint64_t(const GenerationRequest&, std::shared_ptr<TextStream>)>;
  // Submits r.n sequences, choice i sampling with r's seed + i when r has one; when one is not
  // admitted, those already in are cancelled and the error goes on.
  Choices(const OpenAiRequest& r, const text::Tokenizer& tokenizer, const TextStream::TokenTiming& timing,
          Scheduler& scheduler, const Submit& submit);
  Choices(const Choices&) = delete;
  Choices& operator=(const Choices&) = delete;

  int64_t size() const { return int64_t(streams_.size()); }
  // What each choice has new, as (index, update), waiting up to `timeout` while none has any.
  std::vector<std::pair<int64_t, TextStream::Update>> wait(std::chrono::milliseconds timeout);
  // Every choice's last update has been taken.
  bool finished() const;
  // The reader is gone: every sequence still running is cancelled.
  void abandon();

 private:
  std::vector<std::pair<int64_t, TextStream::Update>> collect();

  Scheduler& scheduler_;
  std::shared_ptr<Doorbell> doorbell_ = std::make_shared<Doorbell>();
  std::vector<std::shared_ptr<TextStream>> streams_;
  std::vector<uint64_t> sequences_;
  std::vector<bool> finished_;
};

}  // namespace tetra::server
