#include "support/tiny_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "text/byte_level.h"
#include "text/v4_tokens.h"

namespace tetra::testing {

int64_t write_tiny_tokenizer(const std::string& dir) {
  using nlohmann::json;
  json vocab = json::object();
  int64_t next = 0;
  for (int b = 0; b < 256; ++b) vocab[text::bytes_to_byte_level(std::string(1, char(b)))] = next++;
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"e", "r"}, {"a", "n"}, {"o", "n"}, {"r", "e"}};
  json merge_list = json::array();
  for (const auto& [a, b] : merges) {
    merge_list.push_back(a + " " + b);
    vocab[a + b] = next++;
  }
  json added = json::array();
  for (std::string_view t : {text::v4::kBos, text::v4::kEos, text::v4::kUser, text::v4::kAssistant, text::v4::kThinkStart,
                             text::v4::kThinkEnd, text::v4::kLatestReminder}) {
    added.push_back({{"id", next++}, {"content", std::string(t)}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  const json tokenizer = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}}};
  const json config = {{"bos_token", std::string(text::v4::kBos)}, {"eos_token", std::string(text::v4::kEos)}};
  std::filesystem::create_directories(dir);
  std::ofstream(std::filesystem::path(dir) / "tokenizer.json") << tokenizer.dump(1);
  std::ofstream(std::filesystem::path(dir) / "tokenizer_config.json") << config.dump(1);
  return next;
}

}  // namespace tetra::testing
