#pragma once
// The JSON of a checkpoint (config.json, the safetensors index and headers, the tokenizer
// files), parsed with the limits a corrupt file needs.
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tetra {

// Error messages dump values, recursing once per level (10^6 levels overflowed the stack); no
// checkpoint file nests more than a few.
inline constexpr int kMaxJsonFileDepth = 64;

// Parses `text`; invalid JSON and nesting deeper than kMaxJsonFileDepth are model errors naming
// `origin`. `on_key`, if given, sees every object key as it is read, with its depth (1 for the
// keys of the top-level object): nlohmann keeps only the last of repeated keys.
using JsonKeyCallback = std::function<void(int depth, const std::string& key)>;
nlohmann::json parse_json(std::string_view text, const std::string& origin, const JsonKeyCallback& on_key = nullptr);

// parse_json of the regular file `path` (read_regular_file), naming the file.
nlohmann::json read_json_file(const std::string& path, const JsonKeyCallback& on_key = nullptr);

}  // namespace tetra
