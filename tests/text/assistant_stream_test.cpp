// The streaming split of an assistant turn into reasoning, content and tool calls equals the
// whole-text parser for every chunking.
#include "text/assistant_stream.h"

#include <gtest/gtest.h>

#include "text/v4_tokens.h"

namespace tetra::text {
namespace {

struct Result {
  std::string reasoning, content;
  std::vector<ParsedToolCall> calls;
};

Result run(ThinkingMode mode, const std::string& text, size_t chunk) {
  AssistantStream s(mode);
  Result r;
  for (size_t i = 0; i < text.size(); i += chunk) {
    const AssistantDelta d = s.push(text.substr(i, chunk));
    r.reasoning += d.reasoning;
    r.content += d.content;
  }
  AssistantEnd end = s.finish();
  r.reasoning += end.delta.reasoning;
  r.content += end.delta.content;
  r.calls = end.tool_calls;
  return r;
}

const std::string D(v4::kDsml);
const std::string kCall = "\n\n<" + D + "tool_calls>\n<" + D + "invoke name=\"get_weather\">\n<" + D +
                          "parameter name=\"city\" string=\"true\">Paris</" + D + "parameter>\n</" + D + "invoke>\n</" + D +
                          "tool_calls>";

TEST(AssistantStream, SplitsReasoningContentAndToolCallsForEveryChunkSize) {
  const std::string text = "let me think</think>The answer" + kCall;
  for (size_t chunk = 1; chunk <= text.size(); ++chunk) {
    const Result r = run(ThinkingMode::thinking, text, chunk);
    EXPECT_EQ(r.reasoning, "let me think") << chunk;
    EXPECT_EQ(r.content, "The answer") << chunk;
    ASSERT_EQ(r.calls.size(), 1u) << chunk;
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(r.calls[0].arguments, "{\"city\": \"Paris\"}");
  }
}

TEST(AssistantStream, UnfinishedThinkingIsReasoningAndChatModeIsContent) {
  EXPECT_EQ(run(ThinkingMode::thinking, "still </thi", 3).reasoning, "still </thi");
  const Result chat = run(ThinkingMode::chat, "a </think> b", 2);
  EXPECT_EQ(chat.content, "a </think> b");
  EXPECT_EQ(chat.reasoning, "");
}

TEST(AssistantStream, MalformedToolBlockComesBackAsContent) {
  const std::string broken = "x\n\n<" + D + "tool_calls>\nnot a call";
  const Result r = run(ThinkingMode::chat, broken, 4);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, broken);
}

}  // namespace
}  // namespace tetra::text
