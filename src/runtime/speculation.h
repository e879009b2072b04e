#pragma once
// Speculative decoding: a step feeds each decoding sequence its last token and a draft of the
// token after it, and gets logits for both rows. The sampler takes the first row's token and,
// when it equals the draft (the second row's input), the second row's too, so a sequence gets
// exactly the tokens it would one step at a time (the same sampler calls on the same rows'
// logits, at any temperature); a draft that differs is taken back (Model::drop_last_token). Drafts come
// from the checkpoint's MTP block or from the sequence's own text.
//
// One draft, not more: a rejected draft's key overwrote the window ring's row of the position a
// window before it, which no later position reads; a second one would overwrite a row that the
// next step still reads (likewise the compressors' pending rings).
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace tetra {

enum class SpeculativeMethod {
  off,
  mtp,    // the MTP block's most likely token after the last one
  ngram,  // the token that followed the latest earlier occurrence of the last few (prompt lookup)
};

// "off", "mtp" or "ngram" (a usage error naming --speculative otherwise).
SpeculativeMethod parse_speculative_method(const std::string& name);
const char* speculative_method_name(SpeculativeMethod method);

// N-gram drafts (prompt lookup) of one sequence: fed its tokens one by one (prompt, then each
// generated one), it drafts the token that followed the latest earlier occurrence of the last n
// tokens, trying the longest n first (kNgramLongest down to kNgramShortest). Each token costs a
// few hash-map updates, so long contexts draft as fast as short ones.
inline constexpr int64_t kNgramLongest = 4, kNgramShortest = 2;

class NgramIndex {
 public:
  void append(int32_t token);
  // None when the last kNgramShortest tokens never occurred before.
  std::optional<int32_t> draft() const;

 private:
  // The hash of the n tokens that end before position `end`.
  uint64_t key(int64_t n, int64_t end) const;

  std::vector<int32_t> tokens_;
  // For each n, an n-gram's key -> the position of the token that followed its latest occurrence.
  std::array<std::unordered_map<uint64_t, int64_t>, kNgramLongest - kNgramShortest + 1> followers_;
};
}  // namespace tetra
