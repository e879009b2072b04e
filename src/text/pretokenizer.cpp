#include "text/pretokenizer.h"

#include <algorithm>

#include "core/error.h"

namespace tetra::text {
namespace {

using nlohmann::json;

// The GPT-2 pattern that ByteLevel applies when `use_regex` is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

SplitBehavior parse_behavior(const json& value) {
  const std::string name = value.is_string() ? value.get<std::string>() : "";
  if (name == "Removed") return SplitBehavior::removed;
  if (name == "Isolated") return SplitBehavior::isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
  if (name == "MergedWithNext") return SplitBehavior::merged_with_next;
  if (name == "Contiguous") return SplitBehavior::contiguous;
  model_error("tokenizer.json: pre_tokenizer Split has unknown behavior ", value.dump());
}

bool bool_field(const json& config, const char* key, bool fallback) {
  if (!config.contains(key) || config[key].is_null()) return fallback;
  if (!config[key].is_boolean()) model_error("tokenizer.json: pre_tokenizer field '", key, "' must be a boolean");
  return config[key].get<bool>();
}

struct Span {
  size_t begin, end;
  bool is_match;
};

// Groups matched and unmatched spans of one piece into output pieces, as the behaviour says.
void group_spans(const std::vector<Span>& spans, SplitBehavior behavior, std::vector<Span>& out) {
  out.clear();
  switch (behavior) {
    case SplitBehavior::removed:
      for (const Span& s : spans)
        if (!s.is_match) out.push_back(s);
      return;
    case SplitBehavior::isolated:
      out = spans;
      return;
    case SplitBehavior::merged_with_previous: {
      bool previous_match = false;
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous_match = s.is_match;
      }
      return;
    }
    case SplitBehavior::merged_with_next: {
      bool next_match = false;  // walking backwards: whether the span after this one matched
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !next_match && !out.empty()) {
          out.back().begin = it->begin;
        } else {
          out.push_back(*it);
        }
        next_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      return;
    }
    case SplitBehavior::contiguous: {
      bool previous_match = false;
      for (const Span& s : spans) {
        if (s.is_match == previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous_match = s.is_match;
      }
      return;
    }
  }
}

}  // namespace

PreTokenizer::PreTokenizer(const json& config) {
  if (!config.is_null()) add_step(config);
}

void PreTokenizer::add_step(const json& config) {
  if (!config.is_object() || !config.contains("type")) model_error("tokenizer.json: pre_tokenizer entry without a type");
  const std::string type = config["type"].get<std::string>();
  if (type == "Sequence") {
    if (!config.contains("pretokenizers") || !config["pretokenizers"].is_array())
      model_error("tokenizer.json: pre_tokenizer Sequence needs a 'pretokenizers' array");
    for (const json& step : config["pretokenizers"]) add_step(step);
  } else if (type == "Split") {
    const json& pattern = config.value("pattern", json());
    Regex::Syntax syntax;
    std::string text;
    if (pattern.contains("Regex")) {
      syntax = Regex::Syntax::oniguruma;
      text = pattern["Regex"].get<std::string>();
    } else if (pattern.contains("String")) {
      syntax = Regex::Syntax::literal;
      text = pattern["String"].get<std::string>();
    } else {
      model_error("tokenizer.json: pre_tokenizer Split needs a pattern {\"Regex\": ...} or {\"String\": ...}");
    }
    steps_.emplace_back(SplitStep{Regex(text, syntax, "tokenizer.json pre_tokenizer Split"),
                                  parse_behavior(config.value("behavior", json())), bool_field(config, "invert", false)});
  } else if (type == "ByteLevel") {
    if (bool_field(config, "add_prefix_space", true)) steps_.emplace_back(PrefixSpaceStep{});
    if (bool_field(config, "use_regex", true))
      steps_.emplace_back(SplitStep{Regex(kGpt2Pattern, Regex::Syntax::oniguruma, "ByteLevel pre-tokenizer"),
                                    SplitBehavior::isolated, false});
  } else {
    model_error("tokenizer.json: pre_tokenizer type '", type,
                "' is not supported (supported: Sequence, Split, ByteLevel)");
  }
}

void PreTokenizer::split(std::string_view text, PreTokenizerScratch& scratch,
                         std::vector<std::string_view>& pieces) const {
  pieces.clear();
  scratch.arena.clear();
  if (!text.empty()) pieces.push_back(text);
  for (const Step& step : steps_) {
    std::visit([&](const auto& s) { apply(s, pieces, scratch); }, step);
  }
}

void PreTokenizer::apply(const SplitStep& step, std::vector<std::string_view>& pieces,
                         PreTokenizerScratch& scratch) const {
  std::vector<Span> spans, grouped;
  scratch.next.clear();
  for (std::string_view piece : pieces) {
    scratch.matches.clear();
    step.regex.find_all(piece, scratch.regex, scratch.matches);
    spans.clear();
    size_t cursor = 0;
    for (const MatchSpan& m : scratch.matches) {
      if (m.begin > cursor) spans.push_back({cursor, m.begin, step.invert});
      spans.push_back({m.begin, m.end, !step.invert});
      cursor = m.end;
    }
    if (cursor < piece.size()) spans.push_back({cursor, piece.size(), step.invert});
    group_spans(spans, step.behavior, grouped);
    for (const Span& s : grouped)
      if (s.end > s.begin) scratch.next.push_back(piece.substr(s.begin, s.end - s.begin));
  }
  pieces.swap(scratch.next);
}

void PreTokenizer::apply(const PrefixSpaceStep&, std::vector<std::string_view>& pieces,
                         PreTokenizerScratch& scratch) const {
  for (std::string_view& piece : pieces) {
    if (!piece.starts_with(' ')) piece = scratch.arena.emplace_back(" " + std::string(piece));
  }
}

}  // namespace tetra::text
