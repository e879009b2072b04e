#include "text/bpe.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "text/byte_level.h"

namespace tetra::text {
namespace {

using nlohmann::json;

// Heap order: lowest rank first, then leftmost.
bool later(const BpeScratch::Candidate& a, const BpeScratch::Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
}

std::pair<std::string, std::string> merge_halves(const json& entry, size_t rank) {
  if (entry.is_string()) {
    const std::string text = entry.get<std::string>();
    const size_t space = text.find(' ');
    if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos)
      model_error("tokenizer.json: merge #", rank, " '", text, "' is not two tokens separated by one space");
    return {text.substr(0, space), text.substr(space + 1)};
  }
  if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string())
    return {entry[0].get<std::string>(), entry[1].get<std::string>()};
  model_error("tokenizer.json: merge #", rank, " is neither \"a b\" nor [\"a\", \"b\"]: ", entry.dump());
}

}  // namespace

BpeModel::BpeModel(const json& model) {
  if (model.value("type", std::string("BPE")) != "BPE")
    model_error("tokenizer.json: model type '", model["type"].get<std::string>(), "' is not supported (only BPE)");
  if (!model.contains("vocab") || !model["vocab"].is_object()) model_error("tokenizer.json: model.vocab is missing");
  if (!model.contains("merges") || !model["merges"].is_array()) model_error("tokenizer.json: model.merges is missing");
  for (const char* unsupported : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(unsupported) && !model[unsupported].is_null() && model[unsupported] != "")
      model_error("tokenizer.json: model.", unsupported, " is not supported by the byte-level BPE");
  }
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() != 0.0)
    model_error("tokenizer.json: BPE dropout is not supported (inference needs a deterministic tokenizer)");
  ignore_merges_ = model.value("ignore_merges", false);

  for (const auto& [token, id_value] : model["vocab"].items()) {
    if (!is_token_id(id_value))
      model_error("tokenizer.json: vocab entry '", token, "' has no valid id");
    const auto id = id_value.get<TokenId>();
    vocab_.emplace(token, id);
    if (auto bytes = byte_level_to_bytes(token)) vocab_by_bytes_.emplace(*bytes, id);
  }
  for (unsigned b = 0; b < 256; ++b) {
    const std::string spelled = bytes_to_byte_level(std::string(1, char(b)));
    auto it = vocab_.find(spelled);
    if (it == vocab_.end()) model_error("tokenizer.json: the vocabulary has no token for byte 0x", std::hex, b);
    byte_token_[b] = it->second;
  }

  const json& merges = model["merges"];
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto [left, right] = merge_halves(merges[rank], rank);
    auto l = vocab_.find(left), r = vocab_.find(right), m = vocab_.find(left + right);
    if (l == vocab_.end() || r == vocab_.end() || m == vocab_.end())
      model_error("tokenizer.json: merge #", rank, " '", left, " ", right, "' uses a token missing from the vocabulary");
    merges_.emplace(pair_key(l->second, r->second), Merge{uint32_t(rank), m->second});
  }
}

void BpeModel::push_candidate(BpeScratch& scratch, int left) const {
  const int right = scratch.symbols[left].next;
  if (right < 0) return;
  const TokenId a = scratch.symbols[left].id, b = scratch.symbols[right].id;
  auto it = merges_.find(pair_key(a, b));
  if (it == merges_.end()) return;
  scratch.heap.push_back({it->second.rank, left, a, b, it->second.merged_id});
  std::push_heap(scratch.heap.begin(), scratch.heap.end(), later);
}

void BpeModel::encode_piece(std::string_view bytes, BpeScratch& scratch, std::vector<TokenId>& out) const {
  if (ignore_merges_) {
    if (auto it = vocab_by_bytes_.find(std::string(bytes)); it != vocab_by_bytes_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  auto& symbols = scratch.symbols;
  auto& heap = scratch.heap;
  const int n = int(bytes.size());
  symbols.resize(n);
  for (int i = 0; i < n; ++i) symbols[i] = {byte_token_[static_cast<unsigned char>(bytes[i])], i - 1, i + 1 < n ? i + 1 : -1};
  heap.clear();
  for (int i = 0; i + 1 < n; ++i) push_candidate(scratch, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const BpeScratch::Candidate c = heap.back();
    heap.pop_back();
    BpeScratch::Symbol& left = symbols[c.left];
    // Stale candidates: the left symbol was absorbed or either half changed since the push.
    if (left.id != c.left_id || left.next < 0 || symbols[left.next].id != c.right_id) continue;
    const int right = left.next;
    left.id = c.merged_id;
    left.next = symbols[right].next;
    if (left.next >= 0) symbols[left.next].prev = c.left;
    symbols[right].id = TokenId(-1);  // absorbed
    if (left.prev >= 0) push_candidate(scratch, left.prev);
    push_candidate(scratch, c.left);
  }
  for (int i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace tetra::text
