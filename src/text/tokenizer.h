#pragma once
// A Hugging Face tokenizer.json (byte-level BPE, the kind DeepSeek ships) with the bos/eos
// tokens of tokenizer_config.json: text to ids and back. Ids equal those of the `tokenizers`
// library; the post-processor is not applied (prompts carry their own BOS text). One known
// divergence: Debian's PCRE2 10.42 has Unicode 14 tables and the library's Oniguruma Unicode 16,
// so characters assigned since (rare: new scripts and symbols) can be split differently.
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/added_tokens.h"
#include "text/bpe.h"
#include "text/pretokenizer.h"

namespace tetra::text {

// Whether the text of special tokens (e.g. "<｜begin▁of▁sentence｜>") becomes that token or is
// encoded as ordinary text. Non-special added tokens are always recognized, as in the library.
enum class SpecialTokens { as_text, recognized };

class Tokenizer {
 public:
  // Reads `tokenizer_json` and, if present beside it, tokenizer_config.json. Throws a model
  // error naming the file and field on any problem.
  static Tokenizer from_file(const std::filesystem::path& tokenizer_json);
  // From already parsed documents (`config` may be null).
  Tokenizer(const nlohmann::json& tokenizer, const nlohmann::json& config);

  // Throws a usage error if `text` is not valid UTF-8.
  std::vector<TokenId> encode(std::string_view text, SpecialTokens special) const;

  // The text of `ids`; invalid UTF-8 becomes U+FFFD as in the library. Throws a usage error for
  // an id outside the vocabulary.
  std::string decode(std::span<const TokenId> ids) const;

  // The bytes token `id` stands for when decoded (possibly part of a UTF-8 character).
  const std::string& token_bytes(TokenId id) const;

  // Whether `id` is a token of the file (vocabularies may leave ids unused).
  bool has_token(TokenId id) const { return id < known_.size() && known_[id]; }
  const std::vector<AddedToken>& added_tokens() const { return added_.tokens(); }

  std::optional<TokenId> token_id(std::string_view token) const;
  size_t vocab_size() const { return decoded_.size(); }
  std::optional<TokenId> bos_id() const { return bos_id_; }
  std::optional<TokenId> eos_id() const { return eos_id_; }

 private:
  std::optional<TokenId> config_token(const nlohmann::json& config, const char* key) const;

  BpeModel bpe_;
  PreTokenizer pre_tokenizer_;
  AddedTokenMatcher added_;
  std::vector<std::string> decoded_;  // bytes of each id; empty for unused ids
  std::vector<bool> known_;           // whether an id is in the vocabulary or added tokens
  std::optional<TokenId> bos_id_, eos_id_;
};

}  // namespace tetra::text
