#pragma once
// Added tokens of tokenizer.json ("added_tokens"): strings that are cut out of the text before
// pre-tokenization and map straight to their id. Matching follows the Hugging Face library:
// leftmost-longest, tokens with `normalized: false` first, then the others in what is left;
// `lstrip`/`rstrip` absorb neighbouring whitespace. Special tokens can be switched off so their
// text is encoded as ordinary text.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace tetra::text {

struct AddedToken {
  uint32_t id;
  std::string content;
  bool special;
  bool normalized;
  bool lstrip;
  bool rstrip;
};

// One stretch of the input: either an added token or text for the pre-tokenizer.
struct Segment {
  std::string_view text;
  int64_t added_id;  // -1 for ordinary text
};

class AddedTokenMatcher {
 public:
  // `added_tokens` is the "added_tokens" array of tokenizer.json.
  explicit AddedTokenMatcher(const nlohmann::json& added_tokens);

  // Cuts `text` into segments, in order. With `recognize_special` false, special tokens are
  // left in the text.
  void split(std::string_view text, bool recognize_special, std::vector<Segment>& out) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // A byte trie over token contents; `token` is an index into tokens_ or -1.
  struct Node {
    std::vector<std::pair<unsigned char, int>> children;  // sorted by byte
    int token = -1;
  };
  struct Trie {
    std::vector<Node> nodes{Node{}};
    void insert(std::string_view key, int token);
    // Index of the longest token that starts at `pos`, or -1.
    int longest_at(std::string_view text, size_t pos) const;
  };
  void split_pass(std::string_view text, const Trie& trie, bool recognize_special, std::vector<Segment>& out) const;

  std::vector<AddedToken> tokens_;
  Trie raw_trie_;         // normalized: false
  Trie normalized_trie_;  // normalized: true (the normalizer is the identity, see tokenizer.cpp)
};

}  // namespace tetra::text
