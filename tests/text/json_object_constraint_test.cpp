// JSON mode on a hand-made vocabulary: the mask allows exactly the tokens whose bytes continue
// the object, the end token only once it is complete, never unused or control tokens; masks are
// cached by state and stay right when the cache evicts.
#include "text/json_object_constraint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"

namespace tetra::text {
namespace {

// id 0 is unused, 1 the end token, 2 a control token (empty: never allowed)
const std::vector<std::string> kVocabulary = {
    "", "", "", "{", "}", "{\"", "\"", "a", "\":", " ", "1", "0", "1}", "}\n", "[", "]", ",", "\\", "\\n", "\n", "x{", "\"}", "true", "tr", "ue}", "\xc3", "\xa9", "\x01",
};
constexpr int32_t kEnd = 1;

std::shared_ptr<JsonTokenMasks> masks(size_t cached = 64) {
  return std::make_shared<JsonTokenMasks>(kVocabulary, std::vector<int32_t>{kEnd}, cached);
}

std::set<int32_t> allowed_by(JsonObjectConstraint& c) {
  std::vector<float> logits(kVocabulary.size() + 2, 0.0f);  // the model's vocabulary may be larger
  c.mask(logits);
  std::set<int32_t> out;
  for (size_t id = 0; id < logits.size(); ++id)
    if (!std::isinf(logits[id])) out.insert(int32_t(id));
  return out;
}

std::set<int32_t> allowed_after(const std::vector<int32_t>& tokens, std::shared_ptr<JsonTokenMasks> m = masks()) {
  JsonObjectConstraint c(std::move(m));
  for (const int32_t t : tokens) c.advance(t);
  return allowed_by(c);
}

// The ids of `pieces` in kVocabulary.
std::vector<int32_t> ids(std::initializer_list<std::string> pieces) {
  std::vector<int32_t> out;
  for (const auto& p : pieces) out.push_back(int32_t(std::find(kVocabulary.begin(), kVocabulary.end(), p) - kVocabulary.begin()));
  return out;
}

std::set<int32_t> id_set(std::initializer_list<std::string> pieces) {
  const auto v = ids(pieces);
  return {v.begin(), v.end()};
}

TEST(JsonObjectConstraint, MaskAllowsExactlyTheTokensThatContinue) {
  EXPECT_EQ(allowed_after({}), id_set({"{", "{\"", " ", "\n"}));
  // a key may be empty (\":) or start with '}' (\"})
  EXPECT_EQ(allowed_after(ids({"{"})), id_set({"}", "}\n", "\"", " ", "\n", "\"}", "\":"}));
  EXPECT_EQ(allowed_after(ids({"{\"", "a", "\":"})),
            id_set({"{", "{\"", "\"", "1", "0", "1}", "[", " ", "\n", "true", "tr", "\"}", "\":"}));
  EXPECT_EQ(allowed_after(ids({"{\"", "a", "\":", "0"})), id_set({"}", "}\n", ",", " ", "\n"}));  // no 01
  // inside a key: no control byte (not even in "}\n"), no '}' after its closing quote, and the
  // bytes of a UTF-8 character one at a time
  EXPECT_EQ(allowed_after(ids({"{\"", "a"})), id_set({"{", "}", "{\"", "\"", "a", "\":", " ", "1", "0", "1}", "[", "]", ",",
                                                      "\\", "\\n", "x{", "true", "tr", "ue}", "\xc3", "\xa9"}));
  // after a backslash: an escape's letter first (\t of "true", the quote of "\"}")
  EXPECT_EQ(allowed_after(ids({"{\"", "\\"})), id_set({"\"", "\\", "\\n", "\"}", "\":", "true", "tr"}));
}

TEST(JsonObjectConstraint, TheEndTokenOnlyOnceTheObjectIsComplete) {
  JsonObjectConstraint c(masks());
  for (const int32_t t : ids({"{\"", "a", "\":", "tr", "ue}"})) {
    EXPECT_FALSE(c.complete());
    EXPECT_FALSE(allowed_by(c).count(kEnd));
    c.advance(t);
  }
  EXPECT_TRUE(c.complete());
  EXPECT_EQ(allowed_by(c), (std::set<int32_t>{kEnd, ids({" "})[0], ids({"\n"})[0]}));
  c.advance(kEnd);
  EXPECT_TRUE(c.complete());
}

TEST(JsonObjectConstraint, ATokenTheMaskRefusesIsAnError) {
  for (const int32_t bad : {0, 2, kEnd, ids({"}"})[0], int32_t(kVocabulary.size()) + 1}) {
    JsonObjectConstraint c(masks());
    EXPECT_THROW(c.advance(bad), Error) << bad;
  }
}

TEST(JsonObjectConstraint, NoTokenThatContinuesIsAnErrorNotAMaskOfNothing) {
  JsonObjectConstraint c(std::make_shared<JsonTokenMasks>(std::vector<std::string>{"", "[", "x"}, std::vector<int32_t>{0}));
  std::vector<float> logits(3, 0.0f);
  EXPECT_THROW(c.mask(logits), Error);
}

// A cache of one mask, every step a new state: each mask is recomputed and still right.
TEST(JsonObjectConstraint, EvictedMasksAreRecomputedAlike) {
  const auto small = masks(1);
  const std::vector<int32_t> path = ids({"{\"", "a", "\":", "[", "1", ",", "true", "]", "}"});
  for (size_t n = 0; n < path.size(); ++n) {
    const std::vector<int32_t> head(path.begin(), path.begin() + long(n));
    EXPECT_EQ(allowed_after(head, small), allowed_after(head)) << n;
    EXPECT_EQ(allowed_after(head, small), allowed_after(head, small)) << n;
  }
}

}  // namespace
}  // namespace tetra::text
