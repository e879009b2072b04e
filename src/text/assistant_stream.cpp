#include "text/assistant_stream.h"

#include <algorithm>

#include "text/v4_tokens.h"

namespace tetra::text {
namespace {

const std::string kToolCallsStart = "\n\n<" + std::string(v4::kDsml) + "tool_calls";

// Length of the longest tail of `text` that is a proper prefix of `marker`.
size_t partial_marker_tail(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(marker.size() - 1, text.size()); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

}  // namespace

AssistantStream::AssistantStream(ThinkingMode mode)
    : mode_(mode), part_(mode == ThinkingMode::thinking ? Part::reasoning : Part::content) {}

bool AssistantStream::release_until(std::string_view marker, std::string& out) {
  const size_t at = held_.find(marker);
  if (at != std::string::npos) {
    out += held_.substr(0, at);
    held_.erase(0, at + marker.size());
    return true;
  }
  const size_t keep = partial_marker_tail(held_, marker);
  out += held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return false;
}

AssistantDelta AssistantStream::push(std::string_view chunk) {
  all_ += chunk;
  held_ += chunk;
  AssistantDelta d;
  if (part_ == Part::reasoning && release_until(v4::kThinkEnd, d.reasoning)) part_ = Part::content;
  if (part_ == Part::content && release_until(kToolCallsStart, d.content)) {
    part_ = Part::tool_calls;
    held_.clear();  // the block is parsed from all_ at the end
  }
  return d;
}

AssistantEnd AssistantStream::finish() {
  AssistantEnd end;
  if (part_ == Part::reasoning) end.delta.reasoning = held_;
  if (part_ == Part::content) end.delta.content = held_;
  if (part_ == Part::tool_calls) {
    ParsedCompletion parsed = parse_completion(all_, mode_);
    if (parsed.error) {
      end.error = parsed.error;
      end.delta.content = all_.substr(all_.find(kToolCallsStart));
    } else {
      end.tool_calls = std::move(parsed.tool_calls);
    }
  }
  held_.clear();
  return end;
}

}  // namespace tetra::text
