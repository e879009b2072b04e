#pragma once
// Streaming detokenization: token ids arrive one at a time and text leaves in chunks that
// never end inside a UTF-8 character. The chunks concatenated equal Tokenizer::decode of all
// ids, byte for byte (bytes of a character split across tokens are held back until it is
// complete; invalid bytes become U+FFFD exactly where the full decode puts them).
#include <string>

#include "text/tokenizer.h"

namespace tetra::text {

class IncrementalDetokenizer {
 public:
  // `tokenizer` must outlive this object.
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // The text that `id` completes (may be empty while a character is still incomplete).
  std::string push(TokenId id);

  // The rest, at the end of the sequence: held bytes of an unfinished character become U+FFFD.
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  std::string held_;  // bytes of a character that is not complete yet
};

}  // namespace tetra::text
