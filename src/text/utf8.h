#pragma once
// UTF-8 validation and the lossy decoding rule of the Hugging Face tokenizers library (each
// maximal invalid subsequence becomes one U+FFFD), shared by full and streaming decoding so
// that both produce the same bytes.
#include <cstddef>
#include <string>
#include <string_view>

namespace tetra::text {

// Where the first invalid UTF-8 sequence starts, or std::string_view::npos if `s` is valid.
size_t find_invalid_utf8(std::string_view s);

// Throws a usage error naming `what` and the byte offset when `s` is not valid UTF-8.
void require_valid_utf8(std::string_view s, std::string_view what);

// Appends `bytes` to `out` as valid UTF-8, replacing invalid subsequences with U+FFFD, and
// returns how many bytes were consumed. With `final` false, a trailing sequence that is
// incomplete but could still become valid is left unconsumed (the caller keeps it for later).
size_t append_utf8_lossy(std::string_view bytes, bool final, std::string& out);

// Number of bytes of the UTF-8 character starting with lead byte `lead` (1 for invalid leads).
size_t utf8_sequence_length(unsigned char lead);

}  // namespace tetra::text
