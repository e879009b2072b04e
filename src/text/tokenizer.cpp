#include "text/tokenizer.h"

#include "core/error.h"
#include "io/json_file.h"
#include "io/mapped_file.h"
#include "text/byte_level.h"
#include "text/utf8.h"

namespace tetra::text {
namespace {

using nlohmann::json;

// Only tokenizers without text normalization are supported: DeepSeek's is an empty Sequence.
void require_identity_normalizer(const json& normalizer) {
  if (normalizer.is_null()) return;
  if (normalizer.value("type", "") == "Sequence" && normalizer.value("normalizers", json::array()).empty()) return;
  model_error("tokenizer.json: normalizer ", normalizer.dump(), " is not supported (only none or an empty Sequence)");
}

void require_byte_level_decoder(const json& decoder) {
  if (decoder.is_object() && decoder.value("type", "") == "ByteLevel") return;
  model_error("tokenizer.json: decoder ", decoder.dump(), " is not supported (only ByteLevel)");
}

const json& field(const json& j, const char* key) {
  static const json null_value;
  return j.is_object() && j.contains(key) ? j[key] : null_value;
}

}  // namespace

Tokenizer Tokenizer::from_file(const std::filesystem::path& tokenizer_json) {
  const json tokenizer = read_json_file(tokenizer_json.string());
  const auto config_path = tokenizer_json.parent_path() / "tokenizer_config.json";
  const json config = entry_exists(config_path.string()) ? read_json_file(config_path.string()) : json();
  try {
    return Tokenizer(tokenizer, config);
  } catch (const Error& e) {
    model_error(tokenizer_json.string(), ": ", e.what());
  } catch (const json::exception& e) {  // a field of the wrong JSON type
    model_error(tokenizer_json.string(), ": ", e.what());
  }
}

Tokenizer::Tokenizer(const json& tokenizer, const json& config)
    : bpe_(field(tokenizer, "model")),
      pre_tokenizer_(field(tokenizer, "pre_tokenizer")),
      added_(field(tokenizer, "added_tokens")) {
  require_identity_normalizer(field(tokenizer, "normalizer"));
  require_byte_level_decoder(field(tokenizer, "decoder"));

  // Ids index decoded_ and known_: one of 2^31 - 1 would size them to tens of GB. Files number
  // their tokens densely; ids up to twice the count leave room for gaps.
  const size_t limit = 2 * (bpe_.vocab().size() + added_.tokens().size());
  auto add = [&](TokenId id, const std::string& token) {
    if (id >= limit)
      model_error("tokenizer.json: token '", token, "' has id ", id, ", not below ", limit,
                  " (twice the number of tokens)");
    if (id >= decoded_.size()) {
      decoded_.resize(id + 1);
      known_.resize(id + 1);
    }
    decoded_[id] = byte_level_decode_token(token);
    known_[id] = true;
  };
  for (const auto& [token, id] : bpe_.vocab()) {  // hash order: a shared id would decode either way
    if (id < known_.size() && known_[id])
      model_error("tokenizer.json: vocab entry '", token, "' has id ", id, ", as another entry does");
    add(id, token);
  }
  for (const AddedToken& t : added_.tokens()) add(t.id, t.content);
  bos_id_ = config_token(config, "bos_token");
  eos_id_ = config_token(config, "eos_token");
}

std::optional<TokenId> Tokenizer::config_token(const json& config, const char* key) const {
  const json& value = field(config, key);
  std::string content;
  if (value.is_string()) {
    content = value.get<std::string>();
  } else if (value.is_object() && value.contains("content")) {
    if (!value["content"].is_string()) model_error("tokenizer_config.json: ", key, " content is not a string: ", value.dump());
    content = value["content"].get<std::string>();
  } else {
    return std::nullopt;
  }
  auto id = token_id(content);
  if (!id) model_error("tokenizer_config.json: ", key, " '", content, "' is not a token of tokenizer.json");
  return id;
}

std::optional<TokenId> Tokenizer::token_id(std::string_view token) const {
  for (const AddedToken& t : added_.tokens())
    if (t.content == token) return t.id;
  auto it = bpe_.vocab().find(std::string(token));
  if (it != bpe_.vocab().end()) return it->second;
  return std::nullopt;
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, SpecialTokens special) const {
  require_valid_utf8(text, "text to encode");
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 1);
  std::vector<Segment> segments;
  added_.split(text, special == SpecialTokens::recognized, segments);
  PreTokenizerScratch pre_scratch;
  BpeScratch bpe_scratch;
  std::vector<std::string_view> pieces;
  for (const Segment& segment : segments) {
    if (segment.added_id >= 0) {
      ids.push_back(TokenId(segment.added_id));
      continue;
    }
    pre_tokenizer_.split(segment.text, pre_scratch, pieces);
    for (std::string_view piece : pieces) bpe_.encode_piece(piece, bpe_scratch, ids);
  }
  return ids;
}

const std::string& Tokenizer::token_bytes(TokenId id) const {
  if (id >= known_.size() || !known_[id])
    usage_error("token id ", id, " is not in the vocabulary (size ", known_.size(), ")");
  return decoded_[id];
}

std::string Tokenizer::decode(std::span<const TokenId> ids) const {
  std::string bytes;
  for (TokenId id : ids) bytes += token_bytes(id);
  std::string text;
  text.reserve(bytes.size());
  append_utf8_lossy(bytes, true, text);
  return text;
}

}  // namespace tetra::text
