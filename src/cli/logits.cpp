// tetra logits: f32 logits of every position of a batch of token sequences, the first N
// tokens of each through one batched prefill, the rest one token per step (decode path).
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/read_file.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "model/forward.h"

namespace tetra {
namespace {

std::vector<std::vector<int32_t>> read_token_file(const std::string& path) {
  const auto j = nlohmann::json::parse(read_file_or_usage_error(path, "tokens-file"), nullptr, false);
  if (j.is_discarded() || !j.is_array() || j.empty())
    usage_error("--tokens-file ", path, ": expected a non-empty JSON list of token-id lists");
  std::vector<std::vector<int32_t>> batch;
  for (size_t s = 0; s < j.size(); ++s) {
    if (!j[s].is_array() || j[s].empty()) usage_error("--tokens-file ", path, ": sequence ", s, " is not a non-empty list");
    std::vector<int32_t> seq;
    for (size_t t = 0; t < j[s].size(); ++t) {
      const auto& v = j[s][t];
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
        usage_error("--tokens-file ", path, ": sequence ", s, " position ", t, " is not a token id: ", v.dump());
      seq.push_back(int32_t(v.get<int64_t>()));
    }
    batch.push_back(std::move(seq));
  }
  return batch;
}

}  // namespace

int run_logits(const std::vector<std::string>& argv) {
  const Args args(argv, {"model", "tokens-file", "out", "prefill", "device", "kv-cache-dtype", "indexer-cache-dtype",
                         "expert-parallel"},
                  {});
  const std::string dir = args.required("model"), out_path = args.required("out");
  const auto batch = read_token_file(args.required("tokens-file"));
  const CacheTypes caches{parse_kv_cache_dtype(args.get_or("kv-cache-dtype", "fp8")),
                          parse_indexer_cache_dtype(args.get_or("indexer-cache-dtype", "fp4"))};
  int64_t longest = 0;
  for (const auto& s : batch) longest = std::max(longest, int64_t(s.size()));
  const int64_t prefill = args.count("prefill").value_or(longest);
  if (prefill == 0) usage_error("--prefill must be at least 1 (the first step is a prefill)");
  const auto backends = make_backends(args.get_or("device", "cpu"), expert_parallel_option(args));
  Backend* const backend = backends.front().get();

  const ModelConfig config = load_model_config(dir);
  for (size_t s = 0; s < batch.size(); ++s)
    for (size_t t = 0; t < batch[s].size(); ++t)
      if (batch[s][t] >= config.vocab_size)
        usage_error("--tokens-file: sequence ", s, " position ", t, ": token id ", batch[s][t],
                    " is outside the vocabulary [0, ", config.vocab_size, ")");
  const TensorStore store(dir);
  const ModelWeights weights(config, store);
  Model model(config, weights, pointers(backends), caches);

  std::vector<SequenceState> states;
  for (size_t s = 0; s < batch.size(); ++s) states.push_back(model.new_sequence());
  std::vector<std::vector<float>> logits(batch.size());
  for (int64_t done = 0, step = 0; done < longest; ++step) {
    // step 0: the first `prefill` tokens of every sequence; later steps: one token each
    const int64_t take = step == 0 ? prefill : 1;
    std::vector<SequenceState*> active;
    std::vector<std::vector<int32_t>> tokens;
    std::vector<size_t> which;
    for (size_t s = 0; s < batch.size(); ++s) {
      const int64_t from = states[s].length, to = std::min<int64_t>(int64_t(batch[s].size()), from + take);
      if (from >= to) continue;
      active.push_back(&states[s]);
      tokens.emplace_back(batch[s].begin() + from, batch[s].begin() + to);
      which.push_back(s);
    }
    const std::vector<float> out = backend->download(model.step(active, tokens).logits);
    size_t offset = 0;
    for (size_t i = 0; i < which.size(); ++i) {
      const size_t n = tokens[i].size() * size_t(config.vocab_size);
      logits[which[i]].insert(logits[which[i]].end(), out.begin() + long(offset), out.begin() + long(offset + n));
      offset += n;
    }
    done = step == 0 ? std::min(prefill, longest) : done + 1;
  }

  std::ofstream out(out_path, std::ios::binary);
  if (!out) runtime_error("--out ", out_path, ": cannot write");
  for (const auto& l : logits) out.write(reinterpret_cast<const char*>(l.data()), std::streamsize(l.size() * sizeof(float)));
  if (!out) runtime_error("--out ", out_path, ": write failed");
  return 0;
}

}  // namespace tetra
