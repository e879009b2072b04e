#pragma once
// The pre-tokenizer of tokenizer.json: splits text into the pieces that BPE encodes one by
// one. Supports `Split` (regex or literal pattern, every split behaviour, invert), `ByteLevel`
// (optional prefix space and GPT-2 regex) and `Sequence` of those, matching the Hugging Face
// tokenizers library.
#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "text/regex.h"

namespace tetra::text {

enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

// Working memory of one pre-tokenization; pieces may point into its arena.
struct PreTokenizerScratch {
  RegexScratch regex;
  std::vector<MatchSpan> matches;
  std::vector<std::string_view> next;
  std::deque<std::string> arena;  // pieces that got a prefix space
};

class PreTokenizer {
 public:
  // `config` is the "pre_tokenizer" value of tokenizer.json (null: the text is one piece).
  // Throws a model error naming the unsupported type or bad field.
  explicit PreTokenizer(const nlohmann::json& config);

  // Replaces `pieces` with the pieces of `text`, in order. Pieces point into `text` or into
  // `scratch.arena`, which must outlive them.
  void split(std::string_view text, PreTokenizerScratch& scratch, std::vector<std::string_view>& pieces) const;

 private:
  struct SplitStep {
    Regex regex;
    SplitBehavior behavior;
    bool invert;
  };
  // ByteLevel's own work, mapping bytes to characters, is implicit (pieces stay raw bytes);
  // what is left is its prefix space. Its GPT-2 regex becomes a SplitStep of its own.
  struct PrefixSpaceStep {};
  using Step = std::variant<SplitStep, PrefixSpaceStep>;

  void add_step(const nlohmann::json& config);
  void apply(const SplitStep& step, std::vector<std::string_view>& pieces, PreTokenizerScratch& scratch) const;
  void apply(const PrefixSpaceStep& step, std::vector<std::string_view>& pieces, PreTokenizerScratch& scratch) const;

  std::vector<Step> steps_;
};

}  // namespace tetra::text
