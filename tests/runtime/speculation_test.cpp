// The n-gram draft (prompt lookup) and the --speculative names.
#include "runtime/speculation.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"

namespace tetra {
namespace {

std::optional<int32_t> draft(const std::vector<int32_t>& history) {
  NgramIndex index;
  for (const int32_t t : history) index.append(t);
  return index.draft();
}

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

TEST(NgramDraft, FollowsTheSequenceAsItGrows) {
  NgramIndex index;
  for (const int32_t t : {7, 8, 9, 7}) index.append(t);
  EXPECT_FALSE(index.draft().has_value());
  index.append(8);
  EXPECT_EQ(index.draft(), 9);  // 7 8 was followed by 9
  index.append(3);
  EXPECT_FALSE(index.draft().has_value());  // 8 3 is new
  for (const int32_t t : {7, 8}) index.append(t);
  EXPECT_EQ(index.draft(), 3);  // the latest 7 8 was followed by 3
  // a long history drafts from anywhere in it
  NgramIndex long_history;
  for (int32_t i = 0; i < 200000; ++i) long_history.append(i % 50000 + 100);
  long_history.append(5);
  long_history.append(6);
  EXPECT_FALSE(long_history.draft().has_value());
  long_history.append(100);
  EXPECT_FALSE(long_history.draft().has_value());  // 6 100 is new
  long_history.append(101);
  EXPECT_EQ(long_history.draft(), 102);
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
