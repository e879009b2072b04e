#pragma once
// One function per `tetra` subcommand; each takes the arguments after the command name and
// returns the process exit code (errors are thrown as tetra::Error).
#include <string>
#include <vector>

namespace tetra {

int run_info(const std::vector<std::string>& args);
int run_logits(const std::vector<std::string>& args);
int run_perplexity(const std::vector<std::string>& args);
int run_quantize(const std::vector<std::string>& args);
int run_tokenize(const std::vector<std::string>& args);
int run_detokenize(const std::vector<std::string>& args);
int run_render_chat(const std::vector<std::string>& args);
int run_parse_completion(const std::vector<std::string>& args);
int run_generate(const std::vector<std::string>& args);
int run_serve(const std::vector<std::string>& args);
int run_bench(const std::vector<std::string>& args);

}  // namespace tetra
