#pragma once
// Everything a request's text turns into, for one answer: chat deltas (reasoning, content, tool
// calls) or completion text, logprobs, usage; as stream chunks or as one whole response.
#include <vector>

#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/text_stream.h"
#include "text/assistant_stream.h"

namespace tetra::server {

class AnswerBuilder {
 public:
  // `r` and `tokenizer` must outlive the builder.
  AnswerBuilder(const OpenAiRequest& r, const text::Tokenizer& tokenizer, ResponseHeader header);

  // The stream chunks of one update (none when nothing is ready to show).
  std::vector<Json> chunks(const TextStream::Update& u);
  // The whole answer from all updates merged into one.
  Json whole(const TextStream::Update& u, int64_t prompt_tokens);
  // The last stream chunk when usage is asked for: no choices, the token counts.
  Json usage_chunk(int64_t prompt_tokens) const;
  // The first chat stream chunk: the assistant role.
  Json first_chunk() const;
  int64_t completion_tokens() const { return completion_tokens_; }

 private:
  Json logprobs_of(const std::vector<SampledToken>& tokens);

  const OpenAiRequest& r_;
  const text::Tokenizer& tokenizer_;
  ResponseHeader header_;
  text::AssistantStream assistant_;
  int64_t completion_tokens_ = 0;
  int64_t text_offset_ = 0;
};

}  // namespace tetra::server
