#include "server/text_stream.h"

#include "core/error.h"

namespace tetra::server {

void Doorbell::ring() {
  std::lock_guard lock(mutex_);
  ++rings_;
  rung_.notify_all();
}

uint64_t Doorbell::rings() const {
  std::lock_guard lock(mutex_);
  return rings_;
}

void Doorbell::wait(uint64_t seen, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  rung_.wait_for(lock, timeout, [&] { return rings_ > seen; });
}

TextStream::TextStream(const text::Tokenizer& tokenizer, std::vector<std::string> stops, TokenTiming timing,
                       std::shared_ptr<Doorbell> doorbell)
    : timing_(std::move(timing)), doorbell_(std::move(doorbell)), detokenizer_(tokenizer), stops_(std::move(stops)) {}

bool TextStream::on_token(const SampledToken& token) {
  const Clock::time_point now = Clock::now();
  if (timing_) timing_(!any_token_, std::chrono::duration<double>(now - last_).count());
  last_ = now;
  any_token_ = true;
  std::string piece;
  try {
    piece = detokenizer_.push(token.id);
  } catch (const Error&) {
    // An id the tokenizer does not know (a padded vocabulary row) stands for no text.
  }
  const std::string text = stops_.push(piece);
  bool more = false;
  {
    std::lock_guard lock(mutex_);
    pending_.tokens.push_back(token);
    pending_.text += text;
    arrived_.notify_all();
    more = !stops_.stopped() && !abandoned_;
  }
  if (doorbell_) doorbell_->ring();
  return more;
}

void TextStream::on_finish(FinishReason reason, const std::string& error) {
  // The held text belongs to the output unless a stop string ended it.
  std::string rest;
  if (!stops_.stopped()) rest = stops_.push(detokenizer_.finish()) + stops_.finish();
  {
    std::lock_guard lock(mutex_);
    pending_.text += rest;
    pending_.finished = true;
    pending_.reason = reason;
    pending_.error = error;
    arrived_.notify_all();
  }
  if (doorbell_) doorbell_->ring();
}

TextStream::Update TextStream::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  arrived_.wait_for(lock, timeout, [&] { return pending_.finished || !pending_.tokens.empty() || !pending_.text.empty(); });
  Update out = std::move(pending_);
  pending_ = Update{};
  pending_.finished = out.finished;  // finished stays visible to later calls
  pending_.reason = out.reason;
  return out;
}

void TextStream::abandon() {
  std::lock_guard lock(mutex_);
  abandoned_ = true;
}

}  // namespace tetra::server
