#include "server/openai_request.h"

#include <limits>

#include "core/error.h"
#include "server/api_error.h"
#include "text/json_object_constraint.h"

namespace tetra::server {
namespace {

using Json = nlohmann::ordered_json;

bool present(const Json& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

double number(const Json& body, const char* key, double fallback, double low, double high) {
  if (!present(body, key)) return fallback;
  const Json& v = body[key];
  if (!v.is_number()) bad_parameter(key, cat("'", key, "' must be a number, got ", v.dump()));
  const double x = v.get<double>();
  if (!(x >= low && x <= high)) bad_parameter(key, cat("'", key, "' must be between ", low, " and ", high, ", got ", x));
  return x;
}

int64_t integer(const Json& body, const char* key, int64_t fallback, int64_t low, int64_t high) {
  if (!present(body, key)) return fallback;
  const Json& v = body[key];
  if (!v.is_number_integer()) bad_parameter(key, cat("'", key, "' must be an integer, got ", v.dump()));
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    bad_parameter(key, cat("'", key, "' must be between ", low, " and ", high, ", got ", v.dump()));
  const int64_t x = v.get<int64_t>();
  if (x < low || x > high) bad_parameter(key, cat("'", key, "' must be between ", low, " and ", high, ", got ", x));
  return x;
}

bool boolean(const Json& body, const char* key, bool fallback) {
  if (!present(body, key)) return fallback;
  if (!body[key].is_boolean()) bad_parameter(key, cat("'", key, "' must be true or false, got ", body[key].dump()));
  return body[key].get<bool>();
}

// Whether the answer must be a JSON object. Ignoring a requested format would answer something
// else than what was asked, so the formats not supported are refused.
bool json_mode(const Json& body) {
  if (!present(body, "response_format")) return false;
  const Json& f = body["response_format"];
  if (!f.is_object() || !f.contains("type") || (f["type"] != "text" && f["type"] != "json_object"))
    bad_parameter("response_format",
                  "'response_format' must be {\"type\": \"text\"} or {\"type\": \"json_object\"} (json_schema is not supported)");
  return f["type"] == "json_object";
}

std::vector<std::string> stop_strings(const Json& body) {
  if (!present(body, "stop")) return {};
  const Json& v = body["stop"];
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array() || v.size() > 16) bad_parameter("stop", "'stop' must be a string or a list of at most 16 strings");
  std::vector<std::string> out;
  for (const Json& s : v) {
    if (!s.is_string()) bad_parameter("stop", cat("'stop' entries must be strings, got ", s.dump()));
    out.push_back(s.get<std::string>());
  }
  return out;
}

SamplingParams sampling(const Json& body, int64_t vocab) {
  SamplingParams p;
  p.temperature = number(body, "temperature", 1.0, 0.0, 2.0);
  p.top_p = number(body, "top_p", 1.0, 0.0, 1.0);
  if (p.top_p <= 0) bad_parameter("top_p", "'top_p' must be greater than 0");
  p.top_k = integer(body, "top_k", 0, -1, std::numeric_limits<int32_t>::max());
  if (p.top_k < 0) p.top_k = 0;  // -1: off, as in vLLM
  p.min_p = number(body, "min_p", 0.0, 0.0, 1.0);
  p.presence_penalty = number(body, "presence_penalty", 0.0, -2.0, 2.0);
  p.frequency_penalty = number(body, "frequency_penalty", 0.0, -2.0, 2.0);
  p.repetition_penalty = number(body, "repetition_penalty", 1.0, 0.0, 2.0);
  if (p.repetition_penalty <= 0) bad_parameter("repetition_penalty", "'repetition_penalty' must be greater than 0");
  if (present(body, "seed")) {
    const Json& v = body["seed"];
    if (!v.is_number_integer()) bad_parameter("seed", cat("'seed' must be an integer, got ", v.dump()));
    p.seed = v.is_number_unsigned() ? v.get<uint64_t>() : uint64_t(v.get<int64_t>());
  }
  if (present(body, "logit_bias")) {
    const Json& bias = body["logit_bias"];
    if (!bias.is_object()) bad_parameter("logit_bias", "'logit_bias' must be an object of token id to bias");
    for (const auto& [key, value] : bias.items()) {
      size_t used = 0;
      long long id = -1;
      try {
        id = std::stoll(key, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != key.size() || id < 0 || id >= vocab)
        bad_parameter("logit_bias", cat("'logit_bias' key '", key, "' is not a token id in [0, ", vocab, ")"));
      if (!value.is_number() || value.get<double>() < -100 || value.get<double>() > 100)
        bad_parameter("logit_bias", cat("'logit_bias' value for ", key, " must be a number in [-100, 100]"));
      p.logit_bias.emplace_back(int32_t(id), value.get<float>());
    }
  }
  return p;
}

void check_model(const Json& body, const RequestLimits& limits) {
  if (!present(body, "model")) return;
  if (!body["model"].is_string()) bad_parameter("model", "'model' must be a string");
  if (body["model"].get<std::string>() != limits.served_model_name)
    throw ApiError(404, cat("The model '", body["model"].get<std::string>(), "' does not exist; this server serves '",
                            limits.served_model_name, "'"),
                   "model", "model_not_found");
}

// The messages with the request's tools attached to the system message, where V4 reads them.
Json messages_with_tools(const Json& body) {
  if (!present(body, "messages")) bad_parameter("messages", "'messages' is required");
  const Json& messages = body["messages"];
  if (!messages.is_array() || messages.empty()) bad_parameter("messages", "'messages' must be a non-empty list");
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      bad_parameter(cat("messages[", i, "]"), cat("'messages[", i, "]' must be an object with a string 'role'"));
    // a list is OpenAI's content parts, which the encoder reads (text parts only)
    if (m.contains("content") && !m["content"].is_null() && !m["content"].is_string() && !m["content"].is_array())
      bad_parameter(cat("messages[", i, "].content"), cat("'messages[", i, "].content' must be a string or a list of text parts"));
  }
  std::string tool_choice = "auto";
  if (present(body, "tool_choice")) {
    const Json& c = body["tool_choice"];
    if (!c.is_string() || (c != "auto" && c != "none"))
      bad_parameter("tool_choice", "'tool_choice' must be \"auto\" or \"none\" (forcing a tool is not supported)");
    tool_choice = c.get<std::string>();
  }
  if (!present(body, "tools") || tool_choice == "none") return messages;
  const Json& tools = body["tools"];
  if (!tools.is_array()) bad_parameter("tools", "'tools' must be a list");
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    if (!t.is_object() || !t.contains("type") || t["type"] != "function" || !t.contains("function") || !t["function"].is_object() ||
        !t["function"].contains("name") || !t["function"]["name"].is_string())
      bad_parameter(cat("tools[", i, "]"), cat("'tools[", i, "]' must be {\"type\": \"function\", \"function\": {\"name\": ...}}"));
  }
  if (tools.empty()) return messages;
  Json out = messages;
  if (out[0]["role"] != "system") out.insert(out.begin(), Json{{"role", "system"}, {"content", ""}});
  out[0]["tools"] = tools;
  return out;
}

text::ChatOptions chat_options(const Json& body) {
  text::ChatOptions options;
  if (present(body, "reasoning_effort")) {
    const Json& e = body["reasoning_effort"];
    if (!e.is_string() || (e != "low" && e != "medium" && e != "high" && e != "max"))
      bad_parameter("reasoning_effort", "'reasoning_effort' must be \"low\", \"medium\", \"high\" or \"max\"");
    options.thinking_mode = text::ThinkingMode::thinking;
    if (e == "high" || e == "max") options.reasoning_effort = e.get<std::string>();
  }
  if (present(body, "chat_template_kwargs")) {
    const Json& k = body["chat_template_kwargs"];
    if (!k.is_object()) bad_parameter("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    for (const char* key : {"thinking", "enable_thinking"}) {
      if (!k.contains(key)) continue;
      if (!k[key].is_boolean())
        bad_parameter(cat("chat_template_kwargs.", key), cat("'chat_template_kwargs.", key, "' must be true or false"));
      options.thinking_mode = k[key].get<bool>() ? text::ThinkingMode::thinking : text::ThinkingMode::chat;
    }
  }
  return options;
}

std::vector<int32_t> encode(const text::Tokenizer& tokenizer, const std::string& text) {
  const std::vector<text::TokenId> ids = tokenizer.encode(text, text::SpecialTokens::recognized);
  return {ids.begin(), ids.end()};
}

std::vector<int32_t> token_list(const Json& ids, int64_t vocab) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const Json& v = ids[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab)
      bad_parameter("prompt", cat("'prompt[", i, "]' is not a token id in [0, ", vocab, "): ", v.dump()));
    out.push_back(int32_t(v.get<int64_t>()));
  }
  return out;
}

std::vector<int32_t> completion_prompt(const Json& body, const text::Tokenizer& tokenizer, int64_t vocab) {
  if (!present(body, "prompt")) bad_parameter("prompt", "'prompt' is required");
  Json p = body["prompt"];
  // A list holding one prompt is that prompt; several prompts per request are not supported.
  if (p.is_array() && p.size() == 1 && (p[0].is_string() || p[0].is_array())) p = Json(p[0]);
  if (p.is_string()) return encode(tokenizer, p.get<std::string>());
  if (p.is_array() && !p.empty() && p[0].is_number()) return token_list(p, vocab);
  bad_parameter("prompt", "'prompt' must be a string or a list of token ids (one prompt per request)");
}

}  // namespace

nlohmann::ordered_json parse_body(const std::string& body) {
  // Copies, dumps and the chat encoder recurse once per level: a body of 100,000 nested
  // brackets overflowed a request thread's stack and took the server down.
  const Json::parser_callback_t depth_limit = [](int depth, Json::parse_event_t, Json&) {
    if (depth > kMaxJsonDepth) throw ApiError(400, cat("the request body nests JSON deeper than ", kMaxJsonDepth, " levels"));
    return true;
  };
  try {
    Json j = Json::parse(body, depth_limit);
    if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object");
    return j;
  } catch (const Json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    throw ApiError(400, cat("the request body is not valid JSON (UTF-8 text): ", e.what()));
  }
}

OpenAiRequest read_request(Endpoint endpoint, const nlohmann::ordered_json& body, const text::Tokenizer& tokenizer,
                           const RequestLimits& limits) {
  OpenAiRequest r;
  r.endpoint = endpoint;
  check_model(body, limits);
  r.n = integer(body, "n", 1, 1, kMaxChoices);
  if (integer(body, "best_of", r.n, 1, kMaxChoices) != r.n)
    bad_parameter("best_of", "'best_of' other than 'n' is not supported (no choices are generated to be dropped)");
  const bool json_object = json_mode(body);
  r.stream = boolean(body, "stream", false);
  if (present(body, "stream_options")) {
    const Json& o = body["stream_options"];
    if (!o.is_object()) bad_parameter("stream_options", "'stream_options' must be an object");
    if (!r.stream) bad_parameter("stream_options", "'stream_options' is only allowed with \"stream\": true");
    r.include_usage = boolean(o, "include_usage", false);
  }
  r.stop = stop_strings(body);
  GenerationRequest& g = r.generation;
  g.sampling = sampling(body, limits.vocab_size);
  g.stop_token_ids = limits.end_token_ids;

  const char* prompt_param = endpoint == Endpoint::chat ? "messages" : "prompt";
  if (endpoint == Endpoint::chat) {
    const text::ChatOptions options = chat_options(body);
    r.thinking_mode = options.thinking_mode;
    if (json_object && r.thinking_mode == text::ThinkingMode::thinking)  // the reasoning would be held to JSON too
      bad_parameter("response_format", "'response_format' {\"type\": \"json_object\"} is not supported with thinking");
    r.logprobs = g.sampling.logprobs = boolean(body, "logprobs", false);
    g.sampling.top_logprobs = integer(body, "top_logprobs", 0, 0, 20);
    if (g.sampling.top_logprobs > 0 && !r.logprobs)
      bad_parameter("top_logprobs", "'top_logprobs' needs \"logprobs\": true");
    std::string prompt;
    try {
      prompt = text::encode_chat(messages_with_tools(body), options);
    } catch (const Error& e) {  // the encoder names the message and field
      bad_parameter("messages", e.what());
    } catch (const Json::exception& e) {  // a field of a type the encoder does not check
      bad_parameter("messages", cat("a field of 'messages' has the wrong type: ", e.what()));
    }
    g.prompt = encode(tokenizer, prompt);
  } else {
    if (boolean(body, "echo", false)) bad_parameter("echo", "'echo' is not supported");
    if (present(body, "suffix")) bad_parameter("suffix", "'suffix' is not supported");
    g.sampling.top_logprobs = integer(body, "logprobs", 0, 0, 20);
    r.logprobs = g.sampling.logprobs = present(body, "logprobs");
    g.prompt = completion_prompt(body, tokenizer, limits.vocab_size);
  }
  if (json_object) {
    auto masks = limits.json_masks ? limits.json_masks : text::JsonTokenMasks::of_tokenizer(tokenizer, limits.end_token_ids);
    g.constraint = [masks] { return std::make_unique<text::JsonObjectConstraint>(masks); };
  }
  const int64_t prompt_tokens = int64_t(g.prompt.size());
  if (prompt_tokens == 0) bad_parameter(prompt_param, cat("'", prompt_param, "' encodes to no tokens"));
  if (prompt_tokens >= limits.context_length)
    bad_parameter(prompt_param, cat("the prompt has ", prompt_tokens, " tokens; the context length is ", limits.context_length,
                                    " tokens and at least one must be left to generate"));
  const int64_t room = limits.context_length - prompt_tokens;
  const bool completion_key = present(body, "max_completion_tokens");
  const char* max_key = completion_key ? "max_completion_tokens" : "max_tokens";
  if (completion_key) integer(body, "max_tokens", room, 1, std::numeric_limits<int64_t>::max());  // the unused one is checked too
  g.max_tokens = integer(body, max_key, room, 1, std::numeric_limits<int64_t>::max());
  if (g.max_tokens > room)
    bad_parameter(max_key, cat("'", max_key, "' is ", g.max_tokens, " but the prompt has ", prompt_tokens,
                               " tokens and the context length is ", limits.context_length, ": at most ", room, " can be generated"));
  return r;
}

}  // namespace tetra::server
