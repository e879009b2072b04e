#include "text/detokenizer.h"

#include "text/utf8.h"

namespace tetra::text {

std::string IncrementalDetokenizer::push(TokenId id) {
  held_ += tokenizer_.token_bytes(id);
  std::string text;
  const size_t consumed = append_utf8_lossy(held_, false, text);
  held_.erase(0, consumed);
  return text;
}

std::string IncrementalDetokenizer::finish() {
  std::string text;
  append_utf8_lossy(held_, true, text);
  held_.clear();
  return text;
}

}  // namespace tetra::text
