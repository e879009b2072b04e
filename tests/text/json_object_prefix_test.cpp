// The JSON-object prefix recognizer on hand-written documents: every valid document completes,
// every truncation of one is a prefix, and invalid text is refused at its first wrong byte.
#include "text/json_object_prefix.h"

#include <gtest/gtest.h>

#include <string>

namespace tetra::text {
namespace {

// Index of the first byte refused, or -1 when all are taken.
long refused_at(std::string_view bytes) {
  JsonObjectPrefix p;
  for (size_t i = 0; i < bytes.size(); ++i)
    if (!p.feed(static_cast<unsigned char>(bytes[i]))) return long(i);
  return -1;
}

bool completes(std::string_view bytes) {
  JsonObjectPrefix p;
  return p.feed(bytes) && p.complete();
}

TEST(JsonObjectPrefix, ValidDocumentsCompleteAndEveryTruncationIsAPrefix) {
  for (const std::string doc : {
           R"({})", " \n\t\r{ }", R"({"a":1})", R"({"a" : [1, -2.5, 3e10, 0.5E-3, -0, 1E+2], "b": {"c": null}})",
           R"({"t":true,"f":false,"n":null,"s":"x","o":{},"l":[]})", R"({"":[[[]],{"k":[{}]}]})",
           R"({"esc":"\" \\ \/ \b \f \n \r \t \u00e9 \uD83D\uDE00"})", "{\"utf8\":\"caf\xc3\xa9 \xe2\x82\xac\"}",
           R"({"n":[0,10,1.25,-0.0e-0,123456789]})", "{\"a\":1}\n  "}) {
    EXPECT_TRUE(completes(doc)) << doc;
    for (size_t n = 0; n < doc.size(); ++n) {
      JsonObjectPrefix p;
      EXPECT_TRUE(p.feed(std::string_view(doc).substr(0, n))) << doc.substr(0, n);
      EXPECT_EQ(p.complete(), n > doc.rfind('}')) << doc.substr(0, n);
    }
  }
}

TEST(JsonObjectPrefix, InvalidTextIsRefusedAtItsFirstWrongByte) {
  const std::pair<std::string, long> cases[] = {
      {"[]", 0}, {"\"a\"", 0}, {"1", 0}, {"x{}", 0},             // the top level is an object
      {"{}{", 2}, {"{} x", 3}, {"{}\n,", 3},                      // nothing but whitespace after it
      {"{a:1}", 1}, {"{'a':1}", 1}, {"{\"a\" 1}", 5}, {"{\"a\":}", 5},
      {"{\"a\":1,}", 7}, {"{,}", 1}, {"{\"a\":[1,]}", 8}, {"{\"a\":[1 2]}", 8}, {"{\"a\":[}", 6}, {"{\"a\":1]", 6},
      {"{\"a\":01}", 6}, {"{\"a\":1.}", 7}, {"{\"a\":.5}", 5}, {"{\"a\":-}", 6}, {"{\"a\":+1}", 5},
      {"{\"a\":1e}", 7}, {"{\"a\":1e+}", 8}, {"{\"a\":1.5.2}", 8}, {"{\"a\":--1}", 6}, {"{\"a\":1x}", 6},
      {"{\"a\":tru}", 8}, {"{\"a\":nul1}", 8}, {"{\"a\":True}", 5}, {"{\"a\":falsey}", 10},
      {"{\"a\":\"\\x\"}", 7}, {"{\"a\":\"\\u12g4\"}", 10}, {"{\"a\":\"\\U1234\"}", 7},
      {"{\"a\":\"line\nbreak\"}", 10}, {"{\"a\":\"tab\there\"}", 9}, {std::string("{\"a\":\"\0\"}", 9), 6},
  };
  for (const auto& [text, at] : cases) EXPECT_EQ(refused_at(text), at) << text;
}

TEST(JsonObjectPrefix, ARefusedByteLeavesTheStateAsItWas) {
  JsonObjectPrefix p;
  ASSERT_TRUE(p.feed(std::string_view("{\"a\":12")));
  const JsonObjectPrefix before = p;
  EXPECT_FALSE(p.feed('x'));
  EXPECT_EQ(p, before);
  EXPECT_TRUE(p.feed(std::string_view("}")));
  EXPECT_TRUE(p.complete());
}

TEST(JsonObjectPrefix, NestingStopsAt64Levels) {
  const std::string deepest = "{\"a\":" + std::string(63, '[') + std::string(63, ']') + "}";
  EXPECT_TRUE(completes(deepest));
  const std::string deeper = "{\"a\":" + std::string(64, '[');
  EXPECT_EQ(refused_at(deeper), long(deeper.size()) - 1);
  std::string objects = "{";
  for (int i = 1; i < kMaxJsonPrefixDepth; ++i) objects += "\"k\":{";
  EXPECT_EQ(refused_at(objects), -1);
  EXPECT_EQ(refused_at(objects + "\"k\":{"), long(objects.size()) + 4);
}

// Arrays and objects are told apart at every level: a closing bracket must match its opener.
TEST(JsonObjectPrefix, ClosersMatchTheirOpenersAtEveryDepth) {
  EXPECT_TRUE(completes(R"({"a":[{"b":[[{}],{}]}]})"));
  EXPECT_EQ(refused_at(R"({"a":[{"b":[[{}}]})"), 15);
  EXPECT_EQ(refused_at(R"({"a":[{"b":1]})"), 12);
}

}  // namespace
}  // namespace tetra::text
