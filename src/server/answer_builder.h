#pragma once
// Everything one choice's text turns into: chat deltas (reasoning, content, tool calls) or
// completion text, logprobs; as stream chunks or as the choice of a whole response.
#include <vector>

#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/text_stream.h"
#include "text/assistant_stream.h"

namespace tetra::server {

class AnswerBuilder {
 public:
  // `r` and `tokenizer` must outlive the builder; `index`: the choice's.
  AnswerBuilder(const OpenAiRequest& r, const text::Tokenizer& tokenizer, ResponseHeader header, int64_t index = 0);

  // The stream chunks of one update (none when nothing is ready to show).
  std::vector<Json> chunks(const TextStream::Update& u);
  // The choice of a whole response from all updates merged into one.
  Json choice(const TextStream::Update& u);
  // The first chat stream chunk: the assistant role.
  Json first_chunk() const;
  int64_t completion_tokens() const { return completion_tokens_; }

 private:
  Json logprobs_of(const std::vector<SampledToken>& tokens);

  const OpenAiRequest& r_;
  const text::Tokenizer& tokenizer_;
  ResponseHeader header_;
  int64_t index_;
  text::AssistantStream assistant_;
  int64_t completion_tokens_ = 0;
  int64_t text_offset_ = 0;
};

}  // namespace tetra::server
