#include "text/dsml.h"

#include "core/error.h"
#include "text/python_json.h"
#include "text/v4_tokens.h"

namespace tetra::text {

std::string arguments_to_dsml(const nlohmann::ordered_json& arguments) {
  nlohmann::ordered_json parsed;
  bool ok = false;
  if (arguments.is_string()) {
    try {
      parsed = nlohmann::ordered_json::parse(arguments.get<std::string>());
      ok = true;
    } catch (const nlohmann::json::exception&) {
    }
  }
  if (!ok) parsed = nlohmann::ordered_json{{"arguments", arguments}};
  if (!parsed.is_object()) usage_error("tool call arguments must be a JSON object, got ", arguments.dump());

  std::string out;
  for (const auto& [key, value] : parsed.items()) {
    if (!out.empty()) out += '\n';
    out += cat("<", v4::kDsml, "parameter name=\"", key, "\" string=\"", value.is_string() ? "true" : "false", "\">");
    out += value.is_string() ? value.get<std::string>() : python_json_dumps(value);
    out += cat("</", v4::kDsml, "parameter>");
  }
  return out;
}

std::string dsml_to_arguments(const std::vector<DsmlParameter>& parameters) {
  std::string out = "{";
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (i) out += ", ";
    const DsmlParameter& p = parameters[i];
    out += python_json_dumps(p.name) + ": " + (p.is_string ? python_json_dumps(p.value) : p.value);
  }
  return out + "}";
}

}  // namespace tetra::text
