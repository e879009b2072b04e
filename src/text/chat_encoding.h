#pragma once
// The DeepSeek-V4 chat prompt of OpenAI-style messages, with the semantics of the public
// encoding_dsv4.py (encode_messages): system / user / developer / assistant / tool /
// latest_reminder messages, tool results merged into user turns in call order, chat and
// thinking mode, dropping of earlier reasoning, reasoning effort, tools as DSML,
// response_format and tasks.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace tetra::text {

enum class ThinkingMode { chat, thinking };

// "chat" or "thinking"; anything else is a usage error naming `where`.
ThinkingMode parse_thinking_mode(std::string_view name, std::string_view where);

struct ChatOptions {
  ThinkingMode thinking_mode = ThinkingMode::chat;
  std::optional<std::string> reasoning_effort;  // "max", "high" or none
  bool drop_thinking = true;                    // drop reasoning of turns before the last user turn
  bool add_bos = true;
};

// The prompt text. Throws a usage error naming the message index and field for bad input.
std::string encode_chat(const nlohmann::ordered_json& messages, const ChatOptions& options);

}  // namespace tetra::text
