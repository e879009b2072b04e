// Encode throughput of tetra's tokenizer on one text file, single thread: the best of several
// runs, as bytes per second. tests/node/bench_encode.mjs runs it beside the Hugging Face
// `tokenizers` library on the same text.
// Usage: tetra_encode_bench TOKENIZER_JSON TEXT_FILE [RUNS]
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>

#include "text/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fputs("usage: tetra_encode_bench TOKENIZER_JSON TEXT_FILE [RUNS]\n", stderr);
    return 2;
  }
  try {
    const auto tokenizer = tetra::text::Tokenizer::from_file(argv[1]);
    std::ifstream in(argv[2], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "cannot open %s\n", argv[2]);
      return 2;
    }
    std::ostringstream buffer;
    buffer << in.rdbuf();
    const std::string text = buffer.str();
    const int runs = argc > 3 ? std::stoi(argv[3]) : 5;
    double best = 1e30;
    size_t tokens = 0;
    for (int r = 0; r < runs; ++r) {
      const auto start = std::chrono::steady_clock::now();
      tokens = tokenizer.encode(text, tetra::text::SpecialTokens::recognized).size();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::printf("{\"bytes\": %zu, \"tokens\": %zu, \"seconds\": %.6f, \"bytes_per_second\": %.1f}\n", text.size(), tokens,
                best, double(text.size()) / best);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tetra_encode_bench: %s\n", e.what());
    return 1;
  }
}
