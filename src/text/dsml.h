#pragma once
// Tool-call arguments in DSML, the markup DeepSeek-V4 writes tool calls in: one
// `<｜DSML｜parameter name="k" string="true|false">v</｜DSML｜parameter>` line per argument,
// strings as they are and everything else as JSON.
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace tetra::text {

// The DSML parameter lines of an OpenAI `arguments` value (normally a JSON object in a
// string; anything that does not parse is passed as one string argument named "arguments").
// Throws a usage error if it parses to something other than an object.
std::string arguments_to_dsml(const nlohmann::ordered_json& arguments);

struct DsmlParameter {
  std::string name;
  std::string value;
  bool is_string;
};

// The OpenAI `arguments` JSON text of parsed DSML parameters, in their order.
std::string dsml_to_arguments(const std::vector<DsmlParameter>& parameters);

}  // namespace tetra::text
