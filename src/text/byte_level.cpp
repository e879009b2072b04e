#include "text/byte_level.h"

#include <array>
#include <cstdint>

namespace tetra::text {
namespace {

// Printable bytes keep their own code point; the other 68 bytes are moved to U+0100 and up
// in byte order.
constexpr bool is_printable_byte(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Alphabet {
  std::array<char32_t, 256> char_of_byte{};
  std::array<int16_t, 324> byte_of_char{};  // code points below 256 + 68

  constexpr Alphabet() {
    byte_of_char.fill(-1);
    unsigned moved = 0;
    for (unsigned b = 0; b < 256; ++b) {
      const char32_t c = is_printable_byte(b) ? char32_t(b) : char32_t(256 + moved++);
      char_of_byte[b] = c;
      byte_of_char[c] = int16_t(b);
    }
  }
};

constexpr Alphabet kAlphabet;

void append_code_point(char32_t c, std::string& out) {
  if (c < 0x80) {
    out.push_back(char(c));
  } else {  // the alphabet only uses code points below U+0800
    out.push_back(char(0xC0 | (c >> 6)));
    out.push_back(char(0x80 | (c & 0x3F)));
  }
}

}  // namespace

std::optional<std::string> byte_level_to_bytes(std::string_view token) {
  std::string bytes;
  bytes.reserve(token.size());
  size_t i = 0;
  while (i < token.size()) {
    const auto lead = static_cast<unsigned char>(token[i]);
    char32_t c;
    if (lead < 0x80) {
      c = lead;
      i += 1;
    } else if ((lead & 0xE0) == 0xC0 && i + 1 < token.size()) {
      c = char32_t(lead & 0x1F) << 6 | char32_t(static_cast<unsigned char>(token[i + 1]) & 0x3F);
      i += 2;
    } else {
      return std::nullopt;
    }
    if (c >= kAlphabet.byte_of_char.size() || kAlphabet.byte_of_char[c] < 0) return std::nullopt;
    bytes.push_back(char(kAlphabet.byte_of_char[c]));
  }
  return bytes;
}

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_code_point(kAlphabet.char_of_byte[b], out);
  return out;
}

std::string byte_level_decode_token(std::string_view token) {
  if (auto bytes = byte_level_to_bytes(token)) return *bytes;
  return std::string(token);
}

}  // namespace tetra::text
