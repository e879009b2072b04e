#pragma once
// The byte-level BPE model of tokenizer.json: the vocabulary and ranked merges, applied to
// one pre-tokenized piece at a time. Works on raw bytes: each piece starts as one symbol per
// byte and the lowest-ranked adjacent pair is merged (leftmost first) until none applies,
// exactly as the Hugging Face tokenizers library does.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tetra::text {

using TokenId = uint32_t;

// Whether a tokenizer.json id (a vocabulary entry's or an added token's) is an integer in
// [0, 2^31): get<TokenId> would wrap -1 to 2^32-1 and cut 2^40 to 0.
inline bool is_token_id(const nlohmann::json& id) {
  return id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() <= INT32_MAX;
}

// Working memory of one word's merges, reused across words.
struct BpeScratch {
  struct Symbol {
    TokenId id;
    int prev, next;
  };
  struct Candidate {
    uint32_t rank;
    int left;  // symbol index of the pair's left half
    TokenId left_id, right_id, merged_id;
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

class BpeModel {
 public:
  // `model` is the "model" value of tokenizer.json; merges may be "a b" strings or ["a", "b"]
  // pairs. Throws a model error naming the offending entry.
  explicit BpeModel(const nlohmann::json& model);

  // Appends the ids of one piece (raw bytes, non-empty).
  void encode_piece(std::string_view bytes, BpeScratch& scratch, std::vector<TokenId>& out) const;

  // Token strings as written in the vocabulary (byte-level alphabet) and their ids.
  const std::unordered_map<std::string, TokenId>& vocab() const { return vocab_; }

 private:
  struct Merge {
    uint32_t rank;
    TokenId merged_id;
  };
  static uint64_t pair_key(TokenId left, TokenId right) { return uint64_t(left) << 32 | right; }
  void push_candidate(BpeScratch& scratch, int left) const;

  std::unordered_map<std::string, TokenId> vocab_;
  std::unordered_map<std::string, TokenId> vocab_by_bytes_;  // for ignore_merges
  TokenId byte_token_[256] = {};
  std::unordered_map<uint64_t, Merge> merges_;
  bool ignore_merges_ = false;
};

}  // namespace tetra::text
