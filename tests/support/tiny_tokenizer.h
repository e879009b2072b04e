#pragma once
// A small byte-level BPE tokenizer.json for tests that need a model and its tokenizer: the 256
// byte tokens, a few English merges, and the DeepSeek-V4 chat special tokens as added tokens.
#include <cstdint>
#include <string>

namespace tetra::testing {

// Writes DIR/tokenizer.json and DIR/tokenizer_config.json (bos/eos); returns the vocabulary size.
int64_t write_tiny_tokenizer(const std::string& dir);

}  // namespace tetra::testing
