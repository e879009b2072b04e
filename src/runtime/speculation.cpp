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

std::optional<int32_t> ngram_draft(std::span<const int32_t> history) {
  const int64_t size = int64_t(history.size());
  for (int64_t n = std::min(kNgramLongest, size - 1); n >= kNgramShortest; --n) {
    const auto suffix = history.subspan(size_t(size - n));
    // the latest occurrence that ends before the suffix does, so a token follows it
    for (int64_t start = size - n - 1; start >= 0; --start)
      if (std::equal(suffix.begin(), suffix.end(), history.begin() + start)) return history[size_t(start + n)];
  }
  return std::nullopt;
}

}  // namespace tetra
