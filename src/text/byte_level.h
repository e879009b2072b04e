#pragma once
// The byte-level alphabet of GPT-2 style BPE: every byte is written as one printable Unicode
// character, so vocabularies can be stored as text. Tokens are kept internally as the raw
// bytes they stand for.
#include <optional>
#include <string>
#include <string_view>

namespace tetra::text {

// The raw bytes a byte-level token string stands for, or nullopt if some character of it is
// not in the byte alphabet.
std::optional<std::string> byte_level_to_bytes(std::string_view token);

// The byte-level spelling of raw bytes (inverse of byte_level_to_bytes).
std::string bytes_to_byte_level(std::string_view bytes);

// What the ByteLevel decoder emits for a token: its bytes when every character is in the byte
// alphabet, else the token's own UTF-8 (how added tokens such as "<｜User｜>" decode).
std::string byte_level_decode_token(std::string_view token);

}  // namespace tetra::text
