#include "text/utf8.h"

#include "core/error.h"

namespace tetra::text {
namespace {

enum class SequenceKind { valid, invalid, incomplete };

struct Sequence {
  SequenceKind kind;
  size_t length;  // bytes it covers: the character, or the maximal invalid subpart
};

// Allowed range of the second byte for each lead byte (the first continuation byte is the
// one that rules out overlong forms, surrogates and code points above U+10FFFF).
bool second_byte_ok(unsigned char lead, unsigned char b) {
  if (lead == 0xE0) return b >= 0xA0 && b <= 0xBF;
  if (lead == 0xED) return b >= 0x80 && b <= 0x9F;
  if (lead == 0xF0) return b >= 0x90 && b <= 0xBF;
  if (lead == 0xF4) return b >= 0x80 && b <= 0x8F;
  return b >= 0x80 && b <= 0xBF;
}

Sequence next_sequence(std::string_view s, size_t i) {
  const auto lead = static_cast<unsigned char>(s[i]);
  const size_t need = utf8_sequence_length(lead);
  if (lead < 0x80) return {SequenceKind::valid, 1};
  if (lead < 0xC2 || lead > 0xF4) return {SequenceKind::invalid, 1};
  for (size_t k = 1; k < need; ++k) {
    if (i + k >= s.size()) return {SequenceKind::incomplete, k};
    const auto b = static_cast<unsigned char>(s[i + k]);
    const bool ok = k == 1 ? second_byte_ok(lead, b) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return {SequenceKind::invalid, k};
  }
  return {SequenceKind::valid, need};
}

}  // namespace

size_t utf8_sequence_length(unsigned char lead) {
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  return 1;
}

size_t find_invalid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const Sequence seq = next_sequence(s, i);
    if (seq.kind != SequenceKind::valid) return i;
    i += seq.length;
  }
  return std::string_view::npos;
}

void require_valid_utf8(std::string_view s, std::string_view what) {
  const size_t bad = find_invalid_utf8(s);
  if (bad != std::string_view::npos) {
    usage_error(what, " is not valid UTF-8 (invalid byte 0x", std::hex, int(static_cast<unsigned char>(s[bad])),
                std::dec, " at byte offset ", bad, ")");
  }
}

size_t append_utf8_lossy(std::string_view bytes, bool final, std::string& out) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  size_t i = 0;
  while (i < bytes.size()) {
    const Sequence seq = next_sequence(bytes, i);
    if (seq.kind == SequenceKind::valid) {
      out.append(bytes.substr(i, seq.length));
    } else if (seq.kind == SequenceKind::incomplete && !final) {
      return i;
    } else {
      out.append(kReplacement);
    }
    i += seq.length;
  }
  return i;
}

}  // namespace tetra::text
