#include "text/python_json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace tetra::text {
namespace {

void append_string(const std::string& s, std::string& out) {
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

void append_value(const nlohmann::ordered_json& v, std::string& out) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: out += "null"; return;
    case nlohmann::json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; return;
    case nlohmann::json::value_t::number_integer: out += std::to_string(v.get<int64_t>()); return;
    case nlohmann::json::value_t::number_unsigned: out += std::to_string(v.get<uint64_t>()); return;
    case nlohmann::json::value_t::number_float: out += python_float_repr(v.get<double>()); return;
    case nlohmann::json::value_t::string: append_string(v.get_ref<const std::string&>(), out); return;
    case nlohmann::json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& item : v) {
        if (!first) out += ", ";
        first = false;
        append_value(item, out);
      }
      out += ']';
      return;
    }
    case nlohmann::json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, item] : v.items()) {
        if (!first) out += ", ";
        first = false;
        append_string(key, out);
        out += ": ";
        append_value(item, out);
      }
      out += '}';
      return;
    }
    case nlohmann::json::value_t::binary:
    case nlohmann::json::value_t::discarded: out += "null"; return;
  }
}

}  // namespace

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  // Shortest round-trip digits, then laid out the way Python's float_repr_style 'short' does.
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  const std::string sci(buf, result.ptr);  // e.g. "-1.2345e+02"
  const size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  const int exponent = std::stoi(sci.substr(e + 1));
  std::string sign;
  if (mantissa[0] == '-') {
    sign = "-";
    mantissa.erase(0, 1);
  }
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  const int decimal_point = exponent + 1;  // digits d1d2... are 0.d1d2... x 10^decimal_point
  std::string out = sign;
  if (decimal_point > 16 || decimal_point <= -4) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[16];  // "e", the sign and up to 10 digits: room for any int
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp;
  } else if (decimal_point <= 0) {
    out += "0." + std::string(-decimal_point, '0') + digits;
  } else if (size_t(decimal_point) >= digits.size()) {
    out += digits + std::string(decimal_point - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, decimal_point) + "." + digits.substr(decimal_point);
  }
  return out;
}

std::string python_json_dumps(const nlohmann::ordered_json& value) {
  std::string out;
  append_value(value, out);
  return out;
}

}  // namespace tetra::text
