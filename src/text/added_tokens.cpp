#include "text/added_tokens.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "text/bpe.h"

namespace tetra::text {
namespace {

// lstrip/rstrip absorb ASCII whitespace (the library also absorbs non-ASCII spaces; no
// DeepSeek vocabulary uses these flags).
size_t whitespace_before(std::string_view text, size_t end) {
  size_t i = end;
  while (i > 0 && (text[i - 1] == ' ' || (text[i - 1] >= '\t' && text[i - 1] <= '\r'))) --i;
  return i;
}

size_t whitespace_after(std::string_view text, size_t begin) {
  size_t i = begin;
  while (i < text.size() && (text[i] == ' ' || (text[i] >= '\t' && text[i] <= '\r'))) ++i;
  return i;
}

}  // namespace

void AddedTokenMatcher::Trie::insert(std::string_view key, int token) {
  int node = 0;
  for (unsigned char b : key) {
    auto& children = nodes[node].children;
    auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(b, 0),
                               [](const auto& x, const auto& y) { return x.first < y.first; });
    if (it == children.end() || it->first != b) {
      const int child = int(nodes.size());
      it = children.insert(it, {b, child});
      nodes.emplace_back();  // may reallocate: `children` is not used after this
      node = child;
    } else {
      node = it->second;
    }
  }
  nodes[node].token = token;
}

int AddedTokenMatcher::Trie::longest_at(std::string_view text, size_t pos) const {
  int node = 0, found = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    const auto& children = nodes[node].children;
    auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(b, 0),
                               [](const auto& x, const auto& y) { return x.first < y.first; });
    if (it == children.end() || it->first != b) break;
    node = it->second;
    if (nodes[node].token >= 0) found = nodes[node].token;
  }
  return found;
}

AddedTokenMatcher::AddedTokenMatcher(const nlohmann::json& added_tokens) {
  if (added_tokens.is_null()) return;
  if (!added_tokens.is_array()) model_error("tokenizer.json: added_tokens must be an array");
  for (const auto& t : added_tokens) {
    if (!t.contains("id") || !t.contains("content") || !t["content"].is_string())
      model_error("tokenizer.json: added token without id or content: ", t.dump());
    if (!is_token_id(t["id"]))  // the vocabulary's rule: a wrapped -1 sized a table past its end
      model_error("tokenizer.json: added token ", t["content"].dump(), " has no valid id: ", t["id"].dump());
    AddedToken token{t["id"].get<uint32_t>(), t["content"].get<std::string>(), t.value("special", false),
                     t.value("normalized", false), t.value("lstrip", false), t.value("rstrip", false)};
    if (t.value("single_word", false))
      model_error("tokenizer.json: added token '", token.content, "' uses single_word, which is not supported");
    if (token.content.empty()) model_error("tokenizer.json: added token ", token.id, " has empty content");
    tokens_.push_back(std::move(token));
  }
  for (size_t i = 0; i < tokens_.size(); ++i)
    (tokens_[i].normalized ? normalized_trie_ : raw_trie_).insert(tokens_[i].content, int(i));
}

void AddedTokenMatcher::split(std::string_view text, bool recognize_special, std::vector<Segment>& out) const {
  out.clear();
  std::vector<Segment> first;
  split_pass(text, raw_trie_, recognize_special, first);
  for (const Segment& s : first) {
    if (s.added_id >= 0) {
      out.push_back(s);
    } else {
      split_pass(s.text, normalized_trie_, recognize_special, out);
    }
  }
}

void AddedTokenMatcher::split_pass(std::string_view text, const Trie& trie, bool recognize_special,
                                   std::vector<Segment>& out) const {
  size_t text_start = 0;  // start of the pending ordinary text
  size_t pos = 0;
  while (pos < text.size()) {
    const int index = trie.longest_at(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[index];
    size_t end = pos + token.content.size();
    if (token.special && !recognize_special) {  // skipped, as the library's encode_special_tokens does
      pos = end;
      continue;
    }
    size_t begin = pos;
    if (token.lstrip) begin = std::max(whitespace_before(text, begin), text_start);
    if (token.rstrip) end = whitespace_after(text, end);
    if (begin > text_start) out.push_back({text.substr(text_start, begin - text_start), -1});
    out.push_back({text.substr(begin, end - begin), int64_t(token.id)});
    text_start = pos = end;
  }
  if (text_start < text.size()) out.push_back({text.substr(text_start), -1});
}

}  // namespace tetra::text
