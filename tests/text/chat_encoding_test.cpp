#include "text/chat_encoding.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace tetra::text {
namespace {

using Json = nlohmann::ordered_json;

std::string render(const char* messages, ThinkingMode mode = ThinkingMode::chat) {
  ChatOptions options;
  options.thinking_mode = mode;
  return encode_chat(Json::parse(messages), options);
}

TEST(ChatEncoding, ToolResultsMergeIntoOneUserTurnInCallOrder) {
  const std::string prompt = render(R"([
    {"role": "user", "content": "q"},
    {"role": "assistant", "content": "", "tool_calls": [
      {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
      {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "not json"}}]},
    {"role": "tool", "tool_call_id": "c2", "content": "second"},
    {"role": "tool", "tool_call_id": "c1", "content": "first"},
    {"role": "user", "content": "and?"}])");
  EXPECT_NE(prompt.find("<｜DSML｜parameter name=\"arguments\" string=\"true\">not json</｜DSML｜parameter>"), std::string::npos);
  EXPECT_TRUE(prompt.ends_with(
      "<｜end▁of▁sentence｜><｜User｜><tool_result>first</tool_result>\n\n<tool_result>second</tool_result>\n\nand?"
      "<｜Assistant｜></think>"))
      << prompt;
}

TEST(ChatEncoding, TasksAndLatestReminder) {
  EXPECT_EQ(render(R"([{"role": "user", "content": "t", "task": "title"}])"), "<｜begin▁of▁sentence｜><｜User｜>t<｜title｜>");
  EXPECT_EQ(render(R"([{"role": "user", "content": "t", "task": "action"}])", ThinkingMode::thinking),
            "<｜begin▁of▁sentence｜><｜User｜>t<｜Assistant｜><think><｜action｜>");
  EXPECT_EQ(render(R"([{"role": "user", "content": "u"}, {"role": "latest_reminder", "content": "r"}])"),
            "<｜begin▁of▁sentence｜><｜User｜>u<｜Assistant｜></think><｜latest_reminder｜>r");
}

TEST(ChatEncoding, AssistantAfterATaskHasNoThinking) {
  EXPECT_EQ(render(R"([{"role": "user", "content": "t", "task": "query"}, {"role": "assistant", "content": "q"}])",
                   ThinkingMode::thinking),
            "<｜begin▁of▁sentence｜><｜User｜>t<｜query｜>q<｜end▁of▁sentence｜>");
}

TEST(ChatEncoding, BadInputIsAUsageErrorNamingTheField) {
  const char* bad[][2] = {
      {R"([{"role": "robot", "content": "x"}])", "messages[0].role 'robot'"},
      {R"([{"role": "developer", "content": ""}, {"role": "user", "content": "x"}])", "developer message needs content"},
      {R"([{"role": "user", "content": "x", "task": "dance"}])", "messages[0].task 'dance'"},
      {R"([{"role": "user", "content": 5}])", "messages[0].content must be a string"},
      // Fields of the wrong type are usage errors too, never a JSON library exception.
      {R"([{"role": "assistant", "content": "a", "wo_eos": "yes"}, {"role": "user", "content": "x"}])",
       "messages[0].wo_eos must be true or false"},
      {R"([{"role": "assistant", "content": "", "tool_calls": {"function": {"name": "f"}}}, {"role": "user", "content": "x"}])",
       "messages[0].tool_calls must be a list"},
      {R"([{"role": "assistant", "content": "", "tool_calls": "f"}, {"role": "user", "content": "x"}])",
       "messages[0].tool_calls must be a list"},
      {R"([{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": 5}}]}, {"role": "user", "content": "x"}])",
       "a call needs a function with a string name"},
      {R"([{"role": "user", "content": [5]}])", "only text content parts"},
      {R"([{"role": "user", "content": [{"type": 5, "text": "a"}]}])", "only text content parts"},
      {R"([{"role": "user", "content": [{"type": "text", "text": 5}]}])", "only text content parts"},
  };
  for (const auto& [messages, message] : bad) {
    try {
      render(messages);
      ADD_FAILURE() << "no error for " << messages;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::usage);
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
  ChatOptions options;
  options.reasoning_effort = "extreme";
  EXPECT_THROW(encode_chat(Json::parse(R"([{"role": "user", "content": "x"}])"), options), Error);
}

}  // namespace
}  // namespace tetra::text
