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
    "  quantize --input DIR --output DIR --format nvfp4|fp8-mxfp4 [--shard-size-mb N]\n"
    "                                          rewrite a bf16/f32 checkpoint as ModelOpt NVFP4 or\n"
    "                                          official FP8 + MXFP4\n";

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
    if (command == "quantize") return tetra::run_quantize(args);
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
