#pragma once
// Splits an assistant turn into reasoning and content while it streams, and collects its tool
// calls: text before </think> (thinking mode) is reasoning, what follows is content until the
// DSML tool-call block starts, which is held and parsed (parse_completion) at the end. Markers
// split across chunks are held back until they are decided.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/chat_encoding.h"
#include "text/completion_parser.h"

namespace tetra::text {

struct AssistantDelta {
  std::string reasoning, content;
  bool empty() const { return reasoning.empty() && content.empty(); }
};

struct AssistantEnd {
  AssistantDelta delta;  // the held text
  std::vector<ParsedToolCall> tool_calls;
  std::optional<std::string> error;  // a malformed tool-call block (then returned as content)
};

class AssistantStream {
 public:
  explicit AssistantStream(ThinkingMode mode);

  AssistantDelta push(std::string_view chunk);
  AssistantEnd finish();

 private:
  // Appends the part of held_ that cannot start `marker` to `out`; true if `marker` was found
  // (then held_ starts right after it).
  bool release_until(std::string_view marker, std::string& out);

  ThinkingMode mode_;
  enum class Part { reasoning, content, tool_calls } part_;
  std::string held_;
  std::string all_;  // the whole turn, for parsing the tool calls
};

}  // namespace tetra::text
