#include "text/json_object_prefix.h"

namespace tetra::text {
namespace {

constexpr std::string_view kLiterals[] = {"true", "false", "null"};

bool is_whitespace(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_hex(unsigned char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

}  // namespace

bool JsonObjectPrefix::feed(std::string_view bytes) {
  for (const char c : bytes)
    if (!feed(static_cast<unsigned char>(c))) return false;
  return true;
}

bool JsonObjectPrefix::feed(unsigned char c) {
  switch (mode_) {
    case Mode::string:
      if (c == '"') {
        mode_ = in_key_ ? Mode::colon_expected : Mode::after_value;
        in_key_ = false;
      } else if (c == '\\') {
        mode_ = Mode::string_escape;
      } else if (c < 0x20) {
        return false;
      }
      return true;
    case Mode::string_escape:
      if (c == 'u') {
        mode_ = Mode::string_unicode;
      } else if (std::string_view("\"\\/bfnrt").find(char(c)) != std::string_view::npos) {
        mode_ = Mode::string;
      } else {
        return false;
      }
      return true;
    case Mode::string_unicode:
      if (!is_hex(c)) return false;
      if (++detail_ == 4) {
        detail_ = 0;
        mode_ = Mode::string;
      }
      return true;
    case Mode::number_minus:
      if (!is_digit(c)) return false;
      mode_ = c == '0' ? Mode::number_zero : Mode::number_integer;
      return true;
    case Mode::number_zero:
    case Mode::number_integer:
    case Mode::number_fraction:
      if (is_digit(c) && mode_ != Mode::number_zero) return true;
      if (c == '.' && mode_ != Mode::number_fraction) {
        mode_ = Mode::number_point;
        return true;
      }
      if (c == 'e' || c == 'E') {
        mode_ = Mode::exponent_mark;
        return true;
      }
      return end_number(c);
    case Mode::number_point:
      if (!is_digit(c)) return false;
      mode_ = Mode::number_fraction;
      return true;
    case Mode::exponent_mark:
      if (c == '+' || c == '-') {
        mode_ = Mode::exponent_sign;
        return true;
      }
      [[fallthrough]];
    case Mode::exponent_sign:
      if (!is_digit(c)) return false;
      mode_ = Mode::exponent;
      return true;
    case Mode::exponent:
      return is_digit(c) || end_number(c);
    case Mode::literal: {
      const std::string_view literal = kLiterals[detail_ / 8];
      const size_t read = detail_ % 8;
      if (c != static_cast<unsigned char>(literal[read])) return false;
      if (read + 1 == literal.size()) {
        detail_ = 0;
        mode_ = Mode::after_value;
      } else {
        ++detail_;
      }
      return true;
    }
    default:
      return structural(c);
  }
}

// A byte between tokens: whitespace, punctuation, or the first byte of a value.
bool JsonObjectPrefix::structural(unsigned char c) {
  if (is_whitespace(c)) return true;
  const bool in_array = depth_ > 0 && (arrays_ >> (depth_ - 1) & 1);
  switch (mode_) {
    case Mode::start:
      return c == '{' && open(false);
    case Mode::object_open:
      if (c == '}') {
        close();
        return true;
      }
      [[fallthrough]];
    case Mode::key_expected:
      if (c != '"') return false;
      mode_ = Mode::string;
      in_key_ = true;
      return true;
    case Mode::colon_expected:
      if (c != ':') return false;
      mode_ = Mode::value_expected;
      return true;
    case Mode::array_open:
      if (c == ']') {
        close();
        return true;
      }
      [[fallthrough]];
    case Mode::value_expected:
      return begin_value(c);
    case Mode::after_value:
      if (c == ',') {
        mode_ = in_array ? Mode::value_expected : Mode::key_expected;
        return true;
      }
      if (c != (in_array ? ']' : '}')) return false;
      close();
      return true;
    default:  // done: only whitespace
      return false;
  }
}

bool JsonObjectPrefix::begin_value(unsigned char c) {
  if (c == '{' || c == '[') return open(c == '[');
  if (c == '"') {
    mode_ = Mode::string;
  } else if (c == '-') {
    mode_ = Mode::number_minus;
  } else if (c == '0') {
    mode_ = Mode::number_zero;
  } else if (c >= '1' && c <= '9') {
    mode_ = Mode::number_integer;
  } else {
    const uint8_t index = c == 't' ? 0 : c == 'f' ? 1 : c == 'n' ? 2 : 3;
    if (index == 3) return false;
    mode_ = Mode::literal;
    detail_ = uint8_t(index * 8 + 1);
  }
  return true;
}

bool JsonObjectPrefix::open(bool array) {
  if (depth_ == kMaxJsonPrefixDepth) return false;
  if (array) arrays_ |= uint64_t(1) << depth_;
  ++depth_;
  mode_ = array ? Mode::array_open : Mode::object_open;
  return true;
}

void JsonObjectPrefix::close() {
  --depth_;
  arrays_ &= ~(uint64_t(1) << depth_);
  mode_ = depth_ == 0 ? Mode::done : Mode::after_value;
}

// A number ends at the first byte that cannot extend it, which must then follow a value.
bool JsonObjectPrefix::end_number(unsigned char c) {
  JsonObjectPrefix next = *this;
  next.mode_ = Mode::after_value;
  if (!next.structural(c)) return false;
  *this = next;
  return true;
}

}  // namespace tetra::text
