// tetra tokenize / tetra detokenize: text to token ids and back with a tokenizer.json.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/read_file.h"
#include "core/error.h"
#include "text/tokenizer.h"

namespace tetra {

int run_tokenize(const std::vector<std::string>& argv) {
  const Args args(argv, {"tokenizer", "text", "file"}, {"special"});
  const auto tokenizer = text::Tokenizer::from_file(args.required("tokenizer"));
  const auto inline_text = args.get("text");
  const auto file = args.get("file");
  if (inline_text.has_value() == file.has_value()) usage_error("give exactly one of --text S or --file F");
  const std::string input = inline_text ? *inline_text : read_file_or_usage_error(*file, "file");
  const auto mode = args.flag("special") ? text::SpecialTokens::recognized : text::SpecialTokens::as_text;
  std::cout << nlohmann::json(tokenizer.encode(input, mode)).dump() << "\n";
  return 0;
}

int run_detokenize(const std::vector<std::string>& argv) {
  const Args args(argv, {"tokenizer", "ids"}, {});
  const auto tokenizer = text::Tokenizer::from_file(args.required("tokenizer"));
  nlohmann::json ids;
  try {
    ids = nlohmann::json::parse(args.required("ids"));
  } catch (const nlohmann::json::exception& e) {
    usage_error("--ids is not valid JSON: ", e.what());
  }
  if (!ids.is_array()) usage_error("--ids must be a JSON array of token ids");
  std::vector<text::TokenId> values;
  for (const auto& id : ids) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() > UINT32_MAX)
      usage_error("--ids: ", id.dump(), " is not a token id (a non-negative integer)");
    values.push_back(id.get<text::TokenId>());
  }
  std::cout << tokenizer.decode(values);
  return 0;
}

}  // namespace tetra
