// Writes a tiny random DeepSeek-V4 checkpoint with a matching tokenizer into DIR, for the
// generation and server tests: `make_serving_model DIR`.
#include <iostream>

#include "support/tiny_checkpoint.h"
#include "support/tiny_tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_serving_model DIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  tetra::ModelConfig config = tetra::testing::tiny_config();
  config.vocab_size = tetra::testing::write_tiny_tokenizer(dir);
  config.bos_token_id = config.vocab_size - 7;  // the tokenizer's first added token
  config.eos_token_id = config.vocab_size - 6;
  tetra::testing::TinyCheckpointOptions options;
  options.quant = tetra::testing::TinyQuant::nvfp4;
  options.with_mtp = true;  // speculation by MTP
  options.config = config;
  tetra::testing::write_tiny_checkpoint(dir, options);
  std::cout << dir << ": vocabulary " << config.vocab_size << ", context " << config.max_position_embeddings << "\n";
  return 0;
}
