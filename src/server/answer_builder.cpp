#include "server/answer_builder.h"

namespace tetra::server {
namespace {

Json delta_json(const text::AssistantDelta& d) {
  Json delta = Json::object();
  if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
  if (!d.content.empty()) delta["content"] = d.content;
  return delta;
}

}  // namespace

AnswerBuilder::AnswerBuilder(const OpenAiRequest& r, const text::Tokenizer& tokenizer, ResponseHeader header, int64_t index)
    : r_(r), tokenizer_(tokenizer), header_(std::move(header)), index_(index), assistant_(r.thinking_mode) {}

std::vector<Json> AnswerBuilder::chunks(const TextStream::Update& u) {
  completion_tokens_ += int64_t(u.tokens.size());
  std::vector<Json> out;
  const Json logprobs = logprobs_of(u.tokens);
  if (r_.endpoint == Endpoint::completions) {
    if (!u.text.empty() || (r_.logprobs && !u.tokens.empty())) out.push_back(completion_chunk(header_, index_, u.text, logprobs, nullptr));
    if (u.finished) out.push_back(completion_chunk(header_, index_, "", nullptr, finish_reason_name(u.reason, false)));
    return out;
  }
  Json delta = delta_json(assistant_.push(u.text));
  if (!delta.empty() || (r_.logprobs && !u.tokens.empty())) out.push_back(chat_chunk(header_, index_, std::move(delta), logprobs, nullptr));
  if (u.finished) {
    text::AssistantEnd end = assistant_.finish();
    Json last = delta_json(end.delta);
    if (!end.tool_calls.empty()) last["tool_calls"] = tool_calls_json(end.tool_calls, header_.id, true);
    if (!last.empty()) out.push_back(chat_chunk(header_, index_, std::move(last), nullptr, nullptr));
    out.push_back(chat_chunk(header_, index_, Json::object(), nullptr, finish_reason_name(u.reason, !end.tool_calls.empty())));
  }
  return out;
}

Json AnswerBuilder::choice(const TextStream::Update& u) {
  completion_tokens_ = int64_t(u.tokens.size());
  Json choice = {{"index", index_}};
  if (r_.endpoint == Endpoint::completions) {
    choice["text"] = u.text;
    choice["logprobs"] = logprobs_of(u.tokens);
    choice["finish_reason"] = finish_reason_name(u.reason, false);
  } else {
    text::AssistantDelta d = assistant_.push(u.text);
    text::AssistantEnd end = assistant_.finish();
    Json message = {{"role", "assistant"}, {"content", d.content + end.delta.content}};
    if (r_.thinking_mode == text::ThinkingMode::thinking) message["reasoning_content"] = d.reasoning + end.delta.reasoning;
    if (!end.tool_calls.empty()) message["tool_calls"] = tool_calls_json(end.tool_calls, header_.id, false);
    choice["message"] = std::move(message);
    choice["logprobs"] = logprobs_of(u.tokens);
    choice["finish_reason"] = finish_reason_name(u.reason, !end.tool_calls.empty());
  }
  return choice;
}

Json AnswerBuilder::logprobs_of(const std::vector<SampledToken>& tokens) {
  if (!r_.logprobs) return nullptr;
  if (r_.endpoint == Endpoint::chat) return chat_logprobs(tokens, tokenizer_);
  return completion_logprobs(tokens, tokenizer_, text_offset_);
}

Json AnswerBuilder::first_chunk() const {
  return chat_chunk(header_, index_, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr);
}

}  // namespace tetra::server
