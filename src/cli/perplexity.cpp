// tetra perplexity: the model's perplexity on a text file (tokenized with the checkpoint's
// tokenizer.json) or on a JSON list of token ids, over consecutive windows of --context tokens.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/read_file.h"
#include "core/error.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "model/forward.h"
#include "runtime/perplexity.h"
#include "text/tokenizer.h"

namespace tetra {
namespace {
namespace fs = std::filesystem;

constexpr int64_t kDefaultContext = 1024;

std::vector<int32_t> read_id_list(const std::string& path) {
  const auto j = nlohmann::json::parse(read_file_or_usage_error(path, "tokens-file"), nullptr, false);
  if (j.is_discarded() || !j.is_array()) usage_error("--tokens-file ", path, ": expected a JSON list of token ids");
  std::vector<int32_t> ids;
  for (size_t t = 0; t < j.size(); ++t) {
    if (!j[t].is_number_integer() || j[t].get<int64_t>() < 0 || j[t].get<int64_t>() > INT32_MAX)
      usage_error("--tokens-file ", path, ": position ", t, " is not a token id: ", j[t].dump());
    ids.push_back(int32_t(j[t].get<int64_t>()));
  }
  return ids;
}

// The file's text as the model saw its training documents: BOS (when the tokenizer has one),
// then the text with special-token text kept as plain text.
std::vector<int32_t> tokenize_file(const std::string& dir, const std::string& path) {
  const std::string text = read_file_or_usage_error(path, "file");
  if (text.empty()) usage_error("--file ", path, " is empty");
  const fs::path tokenizer_json = fs::path(dir) / "tokenizer.json";
  if (!entry_exists(tokenizer_json.string())) model_error(dir, ": no tokenizer.json (needed to tokenize --file)");
  const auto tokenizer = text::Tokenizer::from_file(tokenizer_json);
  std::vector<int32_t> ids;
  if (tokenizer.bos_id()) ids.push_back(int32_t(*tokenizer.bos_id()));
  for (const auto id : tokenizer.encode(text, text::SpecialTokens::as_text)) ids.push_back(int32_t(id));
  return ids;
}

}  // namespace

int run_perplexity(const std::vector<std::string>& argv) {
  const Args args(argv, {"model", "file", "tokens-file", "device", "context", "chunks", "kv-cache-dtype", "indexer-cache-dtype",
                         "expert-parallel"},
                  {"json", "per-token"});
  const std::string dir = args.required("model");
  if (args.get("file").has_value() == args.get("tokens-file").has_value())
    usage_error("give exactly one of --file TEXT and --tokens-file IDS.json");
  const std::string kv_name = args.get_or("kv-cache-dtype", "fp8"), indexer_name = args.get_or("indexer-cache-dtype", "fp4");
  const CacheTypes caches{parse_kv_cache_dtype(kv_name), parse_indexer_cache_dtype(indexer_name)};
  const auto backends = make_backends(args.get_or("device", "cpu"), expert_parallel_option(args));
  Backend* const backend = backends.front().get();

  const ModelConfig config = load_model_config(dir);
  const int64_t max_context = config.max_position_embeddings > 0 ? config.max_position_embeddings : kDefaultContext;
  const int64_t context = args.count("context").value_or(std::min(kDefaultContext, max_context));
  if (context < 2) usage_error("--context must be at least 2, got ", context);
  if (context > max_context) usage_error("--context ", context, " exceeds the model's max_position_embeddings ", max_context);

  const std::vector<int32_t> ids = args.get("file") ? tokenize_file(dir, *args.get("file")) : read_id_list(*args.get("tokens-file"));
  const std::string source = args.get("file") ? "--file " + *args.get("file") : "--tokens-file " + *args.get("tokens-file");
  if (ids.size() < 2) usage_error(source, ": needs at least 2 tokens to score one, has ", ids.size());
  for (size_t t = 0; t < ids.size(); ++t)
    if (ids[t] >= config.vocab_size)
      usage_error(source, ": position ", t, ": token id ", ids[t], " is outside the vocabulary [0, ", config.vocab_size, ")");

  auto windows = split_windows(ids, context);
  if (const auto chunks = args.count("chunks")) {
    if (*chunks == 0) usage_error("--chunks must be at least 1");
    windows.resize(std::min(windows.size(), size_t(*chunks)));
  }

  const TensorStore store(dir);
  const ModelWeights weights(config, store);
  Model model(config, weights, pointers(backends), caches);
  std::vector<WindowScore> scores;
  for (size_t w = 0; w < windows.size(); ++w) {
    scores.push_back(score_window(model, *backend, windows[w]));
    // running perplexity, as llama.cpp prints it
    std::fprintf(stderr, "[%zu/%zu] %.4f\n", w + 1, windows.size(), perplexity(scores));
  }
  int64_t scored = 0;
  for (const WindowScore& s : scores) scored += s.tokens_scored;
  const double ppl = perplexity(scores);

  if (args.flag("json")) {
    nlohmann::json j = {{"perplexity", ppl}, {"tokens_scored", scored}, {"tokens", ids.size()},
                        {"context", context}, {"kv_cache_dtype", kv_name}, {"indexer_cache_dtype", indexer_name},
                        {"windows", nlohmann::json::array()}};
    for (const WindowScore& s : scores) {
      j["windows"].push_back({{"tokens_scored", s.tokens_scored}, {"nll_sum", s.nll_sum}});
      if (args.flag("per-token")) j["windows"].back()["token_nlls"] = s.token_nlls;
    }
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("perplexity %.4f over %lld tokens (%zu windows of up to %lld tokens; kv cache %s, indexer cache %s)\n",
                ppl, static_cast<long long>(scored), windows.size(), static_cast<long long>(context), kv_name.c_str(),
                indexer_name.c_str());
  }
  return 0;
}

}  // namespace tetra
