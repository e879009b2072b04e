#include "text/completion_parser.h"

#include <gtest/gtest.h>

#include "text/chat_encoding.h"

namespace tetra::text {
namespace {

const std::string kEos = "<｜end▁of▁sentence｜>";

std::string tool_calls_text(const std::string& invokes) {
  return "\n\n<｜DSML｜tool_calls>\n" + invokes + "\n</｜DSML｜tool_calls>";
}

TEST(CompletionParser, ToolCallsRoundTripThroughTheEncoder) {
  // An assistant turn with tool calls, rendered by the encoder, parses back to the same calls.
  const auto messages = nlohmann::ordered_json::parse(R"([
    {"role": "user", "content": "go"},
    {"role": "assistant", "content": "Sure.", "reasoning_content": "plan", "tool_calls": [
      {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"s\": \"x<y>\\n\", \"n\": [1, 2.0], \"o\": {\"k\": null}}"}},
      {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}])");
  ChatOptions options;
  options.thinking_mode = ThinkingMode::thinking;
  options.drop_thinking = false;
  const std::string prompt = encode_chat(messages, options);
  const std::string turn = prompt.substr(prompt.find("<think>") + 7);
  const ParsedCompletion parsed = parse_completion(turn, ThinkingMode::thinking);
  ASSERT_FALSE(parsed.error) << *parsed.error;
  EXPECT_EQ(parsed.reasoning_content, "plan");
  EXPECT_EQ(parsed.content, "Sure.");
  ASSERT_EQ(parsed.tool_calls.size(), 2u);
  EXPECT_EQ(parsed.tool_calls[0].name, "f");
  EXPECT_EQ(parsed.tool_calls[0].arguments, R"({"s": "x<y>\n", "n": [1, 2.0], "o": {"k": null}})");
  EXPECT_EQ(parsed.tool_calls[1].name, "g");
  EXPECT_EQ(parsed.tool_calls[1].arguments, "{}");
}

TEST(CompletionParser, TruncatedToolCallIsContentWithAnError) {
  const std::string text = "why</think>" + std::string("\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" str");
  const ParsedCompletion parsed = parse_completion(text, ThinkingMode::thinking);
  ASSERT_TRUE(parsed.error);
  EXPECT_EQ(parsed.reasoning_content, "why");
  EXPECT_EQ(parsed.content, text.substr(text.find("</think>") + 8));
  EXPECT_TRUE(parsed.tool_calls.empty());
}

TEST(CompletionParser, MalformedOutputsAreFlaggedNotThrown) {
  const std::pair<std::string, std::string> cases[] = {
      {"a" + tool_calls_text("<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"x\" string=\"maybe\">1</｜DSML｜parameter>\n</｜DSML｜invoke>") + kEos,
       "Parameter format error"},
      {"a" + tool_calls_text("<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"x\" string=\"true\">1</｜DSML｜parameter>\n<｜DSML｜parameter name=\"x\" string=\"true\">2</｜DSML｜parameter>\n</｜DSML｜invoke>") + kEos,
       "Duplicate parameter name: 'x'"},
      {"a" + tool_calls_text("<｜DSML｜invoke nom=\"f\">\n</｜DSML｜invoke>") + kEos, "Tool name format error"},
      {"a\n\n<｜DSML｜tool_calls>\n</｜DSML｜tool_calls>trailing" + kEos, "Unexpected content after tool calls"},
      {"done" + kEos + "more", "Unexpected content at end"},
      {"has <think> inside" + kEos, "Unexpected special token '<think>' in content"},
  };
  for (const auto& [text, error] : cases) {
    const ParsedCompletion parsed = parse_completion(text, ThinkingMode::chat);
    ASSERT_TRUE(parsed.error) << text;
    EXPECT_EQ(parsed.error->substr(0, error.size()), error) << text;
    EXPECT_TRUE(parsed.tool_calls.empty());
    EXPECT_FALSE(parsed.content.ends_with(kEos));
  }
}

TEST(CompletionParser, ToolCallsBeforeEndOfThinkingAreMalformed) {
  const ParsedCompletion parsed =
      parse_completion("x" + tool_calls_text("<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>") + kEos, ThinkingMode::thinking);
  ASSERT_TRUE(parsed.error);
  EXPECT_EQ(*parsed.error, "Invalid thinking format: missing </think>");
}

TEST(CompletionParser, JsonHasOpenAiShape) {
  const auto json = to_json(parse_completion("</think>hi" + kEos, ThinkingMode::thinking));
  EXPECT_EQ(json.dump(), R"({"role":"assistant","content":"hi","reasoning_content":"","tool_calls":[]})");
}

}  // namespace
}  // namespace tetra::text
