#include "server/openai_response.h"

namespace tetra::server {
namespace {

Json byte_list(const std::string& bytes) {
  Json out = Json::array();
  for (unsigned char b : bytes) out.push_back(int(b));
  return out;
}

std::string token_text(const text::Tokenizer& tokenizer, int32_t id) {
  try {
    return tokenizer.token_bytes(id);
  } catch (const std::exception&) {
    return {};  // an id outside the tokenizer's vocabulary has no text
  }
}

}  // namespace

Json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens}, {"total_tokens", prompt_tokens + completion_tokens}};
}

std::string finish_reason_name(FinishReason reason, bool has_tool_calls) {
  if (has_tool_calls) return "tool_calls";
  return reason == FinishReason::length ? "length" : "stop";
}

Json chat_logprobs(const std::vector<SampledToken>& tokens, const text::Tokenizer& tokenizer) {
  Json content = Json::array();
  for (const SampledToken& t : tokens) {
    Json top = Json::array();
    for (const auto& [id, lp] : t.top) {
      const std::string s = token_text(tokenizer, id);
      top.push_back({{"token", s}, {"logprob", lp}, {"bytes", byte_list(s)}});
    }
    const std::string s = token_text(tokenizer, t.id);
    content.push_back({{"token", s}, {"logprob", t.logprob}, {"bytes", byte_list(s)}, {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

Json completion_logprobs(const std::vector<SampledToken>& tokens, const text::Tokenizer& tokenizer, int64_t& offset) {
  Json out = {{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()}, {"text_offset", Json::array()}};
  for (const SampledToken& t : tokens) {
    const std::string s = token_text(tokenizer, t.id);
    out["tokens"].push_back(s);
    out["token_logprobs"].push_back(t.logprob);
    Json top = Json::object();
    for (const auto& [id, lp] : t.top) top[token_text(tokenizer, id)] = lp;
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(offset);
    offset += int64_t(s.size());
  }
  return out;
}

Json tool_calls_json(const std::vector<text::ParsedToolCall>& calls, const std::string& request_id, bool with_index) {
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    Json c;
    if (with_index) c["index"] = i;
    c["id"] = "call_" + request_id + "_" + std::to_string(i);
    c["type"] = "function";
    c["function"] = {{"name", calls[i].name}, {"arguments", calls[i].arguments}};
    out.push_back(std::move(c));
  }
  return out;
}

Json chat_chunk(const ResponseHeader& h, int64_t index, Json delta, Json logprobs, Json finish_reason) {
  return {{"id", h.id},
          {"object", "chat.completion.chunk"},
          {"created", h.created},
          {"model", h.model},
          {"choices", Json::array({{{"index", index}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)}, {"finish_reason", std::move(finish_reason)}}})}};
}

Json completion_chunk(const ResponseHeader& h, int64_t index, const std::string& text, Json logprobs, Json finish_reason) {
  return {{"id", h.id},
          {"object", "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", Json::array({{{"index", index}, {"text", text}, {"logprobs", std::move(logprobs)}, {"finish_reason", std::move(finish_reason)}}})}};
}

Json whole_response(const ResponseHeader& h, Endpoint endpoint, Json choices, int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"id", h.id},
          {"object", endpoint == Endpoint::chat ? "chat.completion" : "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", std::move(choices)},
          {"usage", usage_json(prompt_tokens, completion_tokens)}};
}

Json usage_chunk(const ResponseHeader& h, Endpoint endpoint, int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"id", h.id},
          {"object", endpoint == Endpoint::chat ? "chat.completion.chunk" : "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", Json::array()},
          {"usage", usage_json(prompt_tokens, completion_tokens)}};
}

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string sse_event(const Json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace tetra::server
