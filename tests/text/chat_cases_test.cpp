// Every case recorded from the public DeepSeek-V4 encoder (tests/data/chat_v4_cases.json)
// renders and parses exactly as recorded.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "text/chat_encoding.h"
#include "text/completion_parser.h"

namespace tetra::text {
namespace {

nlohmann::ordered_json recorded_cases() {
  std::ifstream in(TETRA_CHAT_CASES_JSON);
  EXPECT_TRUE(in) << "missing " << TETRA_CHAT_CASES_JSON;
  return nlohmann::ordered_json::parse(in);
}

TEST(ChatCases, PromptsEqualTheReferenceEncoder) {
  const auto cases = recorded_cases();
  ASSERT_GE(cases["encode"].size(), 30u);
  for (const auto& c : cases["encode"]) {
    ChatOptions options;
    options.thinking_mode = parse_thinking_mode(c["thinking_mode"].get<std::string>(), "case");
    if (!c["reasoning_effort"].is_null()) options.reasoning_effort = c["reasoning_effort"].get<std::string>();
    options.drop_thinking = c["drop_thinking"].get<bool>();
    EXPECT_EQ(encode_chat(c["messages"], options), c["prompt"].get<std::string>())
        << c["name"] << " " << c["thinking_mode"] << " effort " << c["reasoning_effort"] << " drop " << c["drop_thinking"];
  }
}

TEST(ChatCases, CompletionsParseAsTheReferenceParser) {
  const auto cases = recorded_cases();
  ASSERT_GE(cases["parse"].size(), 5u);
  for (const auto& c : cases["parse"]) {
    const auto mode = parse_thinking_mode(c["thinking_mode"].get<std::string>(), "case");
    const ParsedCompletion parsed = parse_completion(c["text"].get<std::string>(), mode);
    if (c.contains("parsed")) {
      EXPECT_FALSE(parsed.error.has_value()) << *parsed.error;
      EXPECT_EQ(nlohmann::json(to_json(parsed)), nlohmann::json(c["parsed"])) << c["text"];
    } else {
      // The reference raises "AssertionError: <message>"; here the message comes back as a flag.
      const std::string expected = c["error"].get<std::string>();
      ASSERT_TRUE(parsed.error.has_value()) << c["text"];
      EXPECT_EQ(expected.substr(expected.find(": ") + 2), *parsed.error);
      EXPECT_TRUE(parsed.tool_calls.empty());
    }
  }
}

}  // namespace
}  // namespace tetra::text
