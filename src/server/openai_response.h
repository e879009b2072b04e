#pragma once
// The JSON of OpenAI answers: whole responses, stream chunks, logprobs, usage, tool calls.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/scheduler.h"
#include "server/openai_request.h"
#include "text/completion_parser.h"
#include "text/tokenizer.h"

namespace tetra::server {

using Json = nlohmann::ordered_json;

struct ResponseHeader {
  std::string id;  // chatcmpl-... / cmpl-...
  int64_t created = 0;
  std::string model;
};

Json usage_json(int64_t prompt_tokens, int64_t completion_tokens);
// "stop", "length" or "tool_calls".
std::string finish_reason_name(FinishReason reason, bool has_tool_calls);

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs"}]}.
Json chat_logprobs(const std::vector<SampledToken>& tokens, const text::Tokenizer& tokenizer);

// Completions: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}; `offset` is the
// text offset of the first token and moves past these tokens.
Json completion_logprobs(const std::vector<SampledToken>& tokens, const text::Tokenizer& tokenizer, int64_t& offset);

// OpenAI tool_calls entries; `with_index` adds the "index" that stream deltas carry.
Json tool_calls_json(const std::vector<text::ParsedToolCall>& calls, const std::string& request_id, bool with_index);

// One "chat.completion.chunk" / "text_completion" stream event with one choice (of index `index`).
Json chat_chunk(const ResponseHeader& h, int64_t index, Json delta, Json logprobs, Json finish_reason);
Json completion_chunk(const ResponseHeader& h, int64_t index, const std::string& text, Json logprobs, Json finish_reason);
// The last stream chunk when usage is asked for: no choices, the token counts.
Json usage_chunk(const ResponseHeader& h, Endpoint endpoint, int64_t prompt_tokens, int64_t completion_tokens);
// A whole "chat.completion" / "text_completion" response of these choices.
Json whole_response(const ResponseHeader& h, Endpoint endpoint, Json choices, int64_t prompt_tokens, int64_t completion_tokens);

// `data: <json>\n\n`, with invalid UTF-8 (a token's partial character) replaced.
std::string sse_event(const Json& j);
std::string dump(const Json& j);

}  // namespace tetra::server
