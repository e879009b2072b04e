#include "runtime/speculation.h"

#include <algorithm>

#include "core/error.h"

namespace tetra {

SpeculativeMethod parse_speculative_method(const std::string& name) {
  if (name == "off") return SpeculativeMethod::off;
  if (name == "mtp") return SpeculativeMethod::mtp;
  if (name == "ngram") return SpeculativeMethod::ngram;
  usage_error("--speculative must be off, mtp or ngram, got '", name, "'");
}

const char* speculative_method_name(SpeculativeMethod method) {
  switch (method) {
    case SpeculativeMethod::off: return "off";
    case SpeculativeMethod::mtp: return "mtp";
    case SpeculativeMethod::ngram: return "ngram";
  }
  return "?";
}

uint64_t NgramIndex::key(int64_t n, int64_t end) const {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the tokens' values
  for (int64_t i = end - n; i < end; ++i) {
    h ^= uint64_t(uint32_t(tokens_[size_t(i)]));
    h *= 0x100000001b3ull;
  }
  return h;
}

void NgramIndex::append(int32_t token) {
  tokens_.push_back(token);
  const int64_t last = int64_t(tokens_.size()) - 1;
  // the n-grams ending just before the new token now have a token after them
  for (int64_t n = kNgramShortest; n <= kNgramLongest && n <= last; ++n)
    followers_[size_t(n - kNgramShortest)][key(n, last)] = last;
}

std::optional<int32_t> NgramIndex::draft() const {
  const int64_t size = int64_t(tokens_.size());
  for (int64_t n = std::min(kNgramLongest, size); n >= kNgramShortest; --n) {
    const auto& followers = followers_[size_t(n - kNgramShortest)];
    const auto it = followers.find(key(n, size));
    if (it == followers.end()) continue;
    // a hash collision names other tokens: check them, and try a shorter n if they differ
    const int64_t after = it->second;
    if (std::equal(tokens_.end() - n, tokens_.end(), tokens_.begin() + (after - n))) return tokens_[size_t(after)];
  }
  return std::nullopt;
}

}  // namespace tetra
