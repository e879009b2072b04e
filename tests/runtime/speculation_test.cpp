// The n-gram draft (prompt lookup) and the --speculative names.
#include "runtime/speculation.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"

namespace tetra {
namespace {

std::optional<int32_t> draft(const std::vector<int32_t>& history) { return ngram_draft(history); }

TEST(NgramDraft, TheTokenAfterTheLatestEarlierOccurrence) {
  EXPECT_EQ(draft({1, 2, 9, 5, 1, 2, 7, 3, 1, 2}), 7);     // 1 2 seen twice before: the latest wins
  EXPECT_EQ(draft({4, 1, 2, 9, 3, 1, 2, 7, 4, 1, 2}), 9);  // 4 1 2 (three tokens) beats the later 1 2
  EXPECT_EQ(draft({5, 5, 5, 5}), 5);                       // an occurrence overlapping the suffix
  EXPECT_EQ(draft({1, 2, 3, 4, 5, 1, 2, 3, 4}), 5);        // the longest n tried first
}

TEST(NgramDraft, NoneWithoutARepeatOfTwoTokens) {
  EXPECT_FALSE(draft({}).has_value());
  EXPECT_FALSE(draft({3}).has_value());
  EXPECT_FALSE(draft({3, 3}).has_value());       // the suffix itself is the only occurrence
  EXPECT_FALSE(draft({1, 2, 3, 4, 2}).has_value());  // a single token repeated is not enough
  EXPECT_FALSE(draft({1, 2, 3, 1, 3}).has_value());
}

TEST(SpeculativeMethod, NamesAndErrors) {
  for (const auto m : {SpeculativeMethod::off, SpeculativeMethod::mtp, SpeculativeMethod::ngram})
    EXPECT_EQ(parse_speculative_method(speculative_method_name(m)), m);
  try {
    parse_speculative_method("eagle");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--speculative must be off, mtp or ngram, got 'eagle'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tetra
