// Stop strings over every split of the text into chunks: the output never depends on where the
// token boundaries fall.
#include "text/stop_matcher.h"

#include <gtest/gtest.h>

namespace tetra::text {
namespace {

// Feeds `text` in chunks cut at `cuts`; returns what was released and whether it stopped.
std::pair<std::string, bool> run(const std::vector<std::string>& stops, const std::string& text, const std::vector<size_t>& cuts) {
  StopMatcher m(stops);
  std::string out;
  size_t from = 0;
  for (size_t cut : cuts) {
    out += m.push(text.substr(from, cut - from));
    from = cut;
  }
  out += m.push(text.substr(from));
  if (!m.stopped()) out += m.finish();
  return {out, m.stopped()};
}

TEST(StopMatcher, FindsStopStringsAcrossEverySplit) {
  const std::string text = "Hello, world. END here";
  for (size_t a = 0; a <= text.size(); ++a)
    for (size_t b = a; b <= text.size(); ++b) {
      const auto [out, stopped] = run({"END", "xyz"}, text, {a, b});
      EXPECT_EQ(out, "Hello, world. ") << a << "," << b;
      EXPECT_TRUE(stopped);
    }
}

TEST(StopMatcher, EarliestStopWinsAndHeldTextIsReleasedAtTheEnd) {
  EXPECT_EQ(run({"world", "lo"}, "Hello world", {3}).first, "Hel");
  const auto [out, stopped] = run({"EN"}, "no stop E", {8});
  EXPECT_EQ(out, "no stop E");
  EXPECT_FALSE(stopped);
  StopMatcher m({"abc"});
  EXPECT_EQ(m.push("xab"), "x");  // "ab" may begin "abc"
  EXPECT_EQ(m.push("d"), "abd");
}

}  // namespace
}  // namespace tetra::text
