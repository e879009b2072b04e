// tetra: DeepSeek-V4 inference engine. Dispatches to the subcommands of the CLI contract.
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"

namespace {

constexpr const char* kUsage =
    "usage: tetra <command> [options]\n"
    "\n"
    "commands:\n"
    "  info --model DIR [--json] [--summary]   checkpoint summary: config, every tensor's role,\n"
    "                                          format and bytes, weight memory, KV bytes per token\n"
    "  logits --model DIR --tokens-file F.json --out FILE [--prefill N] [--device cpu|cuda]\n"
    "         [--kv-cache-dtype f32|bf16|fp8] [--indexer-cache-dtype f32|bf16|fp4]\n"
    "                                          raw f32 logits of every position ([seq][pos][vocab])\n"
    "  perplexity --model DIR (--file TEXT | --tokens-file IDS.json) [--context N] [--chunks N]\n"
    "         [--json [--per-token]] [--device cpu|cuda] [--kv-cache-dtype ...] [--indexer-cache-dtype ...]\n"
    "                                          perplexity over consecutive windows of N tokens\n"
    "                                          (default 1024); TEXT is tokenized with DIR/tokenizer.json\n"
    "  quantize --input DIR --output DIR --format nvfp4|fp8-mxfp4 [--shard-size-mb N]\n"
    "                                          rewrite a bf16/f32 checkpoint as ModelOpt NVFP4 or\n"
    "                                          official FP8 + MXFP4\n"

    "  tokenize --tokenizer FILE [--special] (--text S | --file F)\n"
    "                                          token ids of a text as a JSON array; --special makes\n"
    "                                          special-token text the special token\n"
    "  detokenize --tokenizer FILE --ids JSON  the text of a JSON array of token ids\n"
    "  render-chat --request FILE              the DeepSeek-V4 prompt of {\"messages\", \"thinking_mode\",\n"
    "                                          \"reasoning_effort\", \"drop_thinking\"}\n"
    "  parse-completion --thinking-mode chat|thinking\n"
    "                                          model output on stdin to an assistant message (JSON)\n"
    "  generate [--model DIR] (--prompt S | --messages FILE) [--max-tokens N] [--temperature T] [--top-k K]\n"
    "           [--top-p P] [--min-p P] [--presence-penalty X] [--frequency-penalty X] [--repetition-penalty X]\n"
    "           [--seed N] [--stop S] [--thinking] [--stream]\n"
    "                                          one completion (raw text) or chat turn (assistant JSON)\n"
    "  serve [--model DIR] [--host 127.0.0.1] [--port 8000] [--api-key KEY] [--served-model-name N]\n"
    "        [--cache-blocks N | --cache-memory-fraction F] [--max-running N] [--max-queued N] [--prefill-chunk N]\n"
    "        [--max-body-bytes N]\n"
    "                                          OpenAI-compatible server (continuous batching)\n"
    "  bench --synthetic v4-flash|v4-pro|DIR [--layers N] [--format nvfp4|mxfp4-fp8] [--batch B...]\n"
    "        [--context C...] [--prefill P] [--steps N] [--device cuda|cpu] [--seed N] [--json FILE]\n"
    "                                          a model of that geometry with random weights, timed:\n"
    "                                          decode steps (every batch × context; --batch alone: none)\n"
    "                                          and a P-token prefill against their byte and FLOP floors\n"
    "  (generate and serve also take --device, --kv-cache-dtype, --indexer-cache-dtype; without\n"
    "   --model they use the demo model at models/demo/nvfp4)\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (command == "info") return tetra::run_info(args);
    if (command == "logits") return tetra::run_logits(args);
    if (command == "perplexity") return tetra::run_perplexity(args);
    if (command == "quantize") return tetra::run_quantize(args);
    if (command == "tokenize") return tetra::run_tokenize(args);
    if (command == "detokenize") return tetra::run_detokenize(args);
    if (command == "render-chat") return tetra::run_render_chat(args);
    if (command == "parse-completion") return tetra::run_parse_completion(args);
    if (command == "generate") return tetra::run_generate(args);
    if (command == "serve") return tetra::run_serve(args);
    if (command == "bench") return tetra::run_bench(args);
    std::cerr << "tetra: unknown command '" << command << "'\n" << kUsage;
    return 2;
  } catch (const tetra::Error& e) {
    std::cerr << "tetra " << command << ": error: " << e.what() << "\n";
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::cerr << "tetra " << command << ": error: " << e.what() << "\n";
    return 1;
  }
}
