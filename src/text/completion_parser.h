#pragma once
// Parses DeepSeek-V4 model output (one assistant turn) into reasoning, content and OpenAI-style
// tool calls, with the semantics of the public encoding_dsv4.py
// (parse_message_from_completion_text). Model output is never trusted: malformed or truncated
// text does not throw but comes back as content with `error` set, so a server can still answer.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/chat_encoding.h"

namespace tetra::text {

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // JSON text
};

struct ParsedCompletion {
  std::string content;
  std::string reasoning_content;
  std::vector<ParsedToolCall> tool_calls;
  // Set when the text does not follow the format; then `content` holds the text after any
  // reasoning (without a final end-of-sentence token) and `tool_calls` is empty.
  std::optional<std::string> error;
};

ParsedCompletion parse_completion(std::string_view text, ThinkingMode mode);

// {"role": "assistant", "content", "reasoning_content", "tool_calls": [{"type": "function",
// "function": {"name", "arguments"}}]} plus "error" when malformed.
nlohmann::ordered_json to_json(const ParsedCompletion& parsed);

}  // namespace tetra::text
