#include "text/python_json.h"

#include <gtest/gtest.h>

namespace tetra::text {
namespace {

using Json = nlohmann::ordered_json;

TEST(PythonJson, FloatsAreWrittenAsPythonRepr) {
  // Expected strings are Python 3's repr() of the same values.
  const std::pair<double, const char*> cases[] = {
      {0.0, "0.0"},          {-0.0, "-0.0"},      {1.0, "1.0"},        {2.5, "2.5"},
      {1e16, "1e+16"},       {1e15, "1000000000000000.0"},             {123456789012345678.0, "1.2345678901234568e+17"},
      {1e-5, "1e-05"},       {0.0001, "0.0001"},  {0.1, "0.1"},        {1.0 / 3, "0.3333333333333333"},
      {-2.5e-7, "-2.5e-07"}, {1e22, "1e+22"},     {5e-324, "5e-324"},  {1.7976931348623157e308, "1.7976931348623157e+308"},
      {100.0, "100.0"},      {12345.678, "12345.678"}};
  for (const auto& [value, expected] : cases) EXPECT_EQ(python_float_repr(value), expected) << value;
}

TEST(PythonJson, SeparatorsKeyOrderAndNesting) {
  const Json value = Json::parse(R"({"b": [1, 2.5, -3, true, null, {}], "a": {"x": [], "y": "z"}, "n": 1E5})");
  EXPECT_EQ(python_json_dumps(value), R"({"b": [1, 2.5, -3, true, null, {}], "a": {"x": [], "y": "z"}, "n": 100000.0})");
}

TEST(PythonJson, StringsKeepNonAsciiAndEscapeControlCharacters) {
  const Json value = std::string("météo \"q\" \\ \n\r\t\b\f \x01\x1f \x7f 你好 🚀");
  EXPECT_EQ(python_json_dumps(value), "\"météo \\\"q\\\" \\\\ \\n\\r\\t\\b\\f \\u0001\\u001f \x7f 你好 🚀\"");
}

TEST(PythonJson, LargeIntegersStayIntegers) {
  EXPECT_EQ(python_json_dumps(Json::parse("[18446744073709551615, -9223372036854775808]")),
            "[18446744073709551615, -9223372036854775808]");
}

}  // namespace
}  // namespace tetra::text
