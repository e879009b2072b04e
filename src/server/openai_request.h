#pragma once
// Reads and validates the body of POST /v1/chat/completions and /v1/completions into a
// generation request: every problem is an ApiError (400) naming the parameter.
#include <nlohmann/json.hpp>
#include <memory>
#include <string>
#include <vector>

#include "runtime/scheduler.h"
#include "text/chat_encoding.h"
#include "text/json_token_masks.h"
#include "text/tokenizer.h"

namespace tetra::server {

enum class Endpoint { chat, completions };

struct RequestLimits {
  std::string served_model_name;
  int64_t context_length = 0;  // prompt + max_tokens
  int64_t vocab_size = 0;
  std::vector<int32_t> end_token_ids;  // tokens that end a turn (EOS)
  // The vocabulary's masks for JSON mode, shared by the server's requests (their cache too);
  // null: made from the tokenizer for the request.
  std::shared_ptr<text::JsonTokenMasks> json_masks;
};

// The most choices ("n") one request may ask for: each is a sequence of its own.
constexpr int64_t kMaxChoices = 16;

struct OpenAiRequest {
  Endpoint endpoint = Endpoint::chat;
  GenerationRequest generation;  // every choice's; choice i samples with seed + i when a seed is set
  int64_t n = 1;                 // choices
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  text::ThinkingMode thinking_mode = text::ThinkingMode::chat;  // how to read the output (chat)
};

// Parses the JSON text of a body (400 for invalid JSON, including invalid UTF-8, and for
// values nested deeper than kMaxJsonDepth).
constexpr int kMaxJsonDepth = 512;
nlohmann::ordered_json parse_body(const std::string& body);

OpenAiRequest read_request(Endpoint endpoint, const nlohmann::ordered_json& body, const text::Tokenizer& tokenizer,
                           const RequestLimits& limits);

}  // namespace tetra::server
