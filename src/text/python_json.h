#pragma once
// JSON text byte-identical to Python's json.dumps(value, ensure_ascii=False): separators ", "
// and ": ", non-ASCII characters written as they are, control characters as \uXXXX (lower-case
// hex), floats as Python's repr (shortest round trip, "1.0", "1e-05", "1e+16"). The DeepSeek-V4
// prompt embeds such JSON, so any other spelling changes the tokens the model sees.
#include <nlohmann/json.hpp>
#include <string>

namespace tetra::text {

std::string python_json_dumps(const nlohmann::ordered_json& value);

// Python's repr of a float.
std::string python_float_repr(double value);

}  // namespace tetra::text
