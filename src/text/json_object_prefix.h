#pragma once
// Recognizes, a byte at a time, the prefixes of one JSON object (RFC 8259: whitespace, then an
// object whose values nest at most kMaxJsonPrefixDepth deep). JSON mode masks tokens with it: a
// token may come next when all of its bytes continue the prefix. The state is 16 bytes and
// compares equal exactly when every continuation is accepted alike (the mask cache's key).
// Strings take any byte from 0x80 up (tokens split UTF-8 characters), never one below 0x20.
#include <cstdint>
#include <string_view>

namespace tetra::text {

inline constexpr int kMaxJsonPrefixDepth = 64;  // arrays and objects open at once

class JsonObjectPrefix {
 public:
  // Takes `byte` when it continues the prefix; otherwise returns false and keeps the state.
  bool feed(unsigned char byte);
  // Takes every byte of `bytes`, or returns false at the first that does not continue (the
  // bytes before it are taken).
  bool feed(std::string_view bytes);
  // Whether the top-level object is closed (only whitespace may follow).
  bool complete() const { return mode_ == Mode::done; }

  bool operator==(const JsonObjectPrefix&) const = default;

 private:
  enum class Mode : uint8_t {
    start, object_open, key_expected, colon_expected, value_expected, array_open, after_value, done,
    string, string_escape, string_unicode,
    number_minus, number_zero, number_integer, number_point, number_fraction, exponent_mark, exponent_sign, exponent,
    literal,
  };
  bool structural(unsigned char byte);
  bool begin_value(unsigned char byte);
  bool open(bool array);
  void close();
  bool end_number(unsigned char byte);

  Mode mode_ = Mode::start;
  bool in_key_ = false;  // the string being read is an object key
  uint8_t detail_ = 0;   // \u hex digits read; a literal's index * 8 + bytes read
  uint8_t depth_ = 0;
  uint64_t arrays_ = 0;  // bit i: level i is an array (else an object); clear above depth_
};

}  // namespace tetra::text
