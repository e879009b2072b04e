// tetra generate: one completion (--prompt) or one chat turn (--messages) through the same
// scheduler, sampler and request validation as the server.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/read_file.h"
#include "core/error.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/text_stream.h"
#include "text/assistant_stream.h"

namespace tetra {
namespace {

using Json = nlohmann::ordered_json;

// The sampling flags as the fields of an OpenAI request body.
Json request_body(const Args& args) {
  Json body = Json::object();
  const std::pair<const char*, const char*> numbers[] = {
      {"temperature", "temperature"},       {"top-p", "top_p"},
      {"min-p", "min_p"},                   {"presence-penalty", "presence_penalty"},
      {"frequency-penalty", "frequency_penalty"}, {"repetition-penalty", "repetition_penalty"}};
  for (const auto& [flag, field] : numbers) {
    if (!args.get(flag)) continue;
    try {
      size_t used = 0;
      const double v = std::stod(*args.get(flag), &used);
      if (used != args.get(flag)->size()) throw std::invalid_argument(flag);
      body[field] = v;
    } catch (const std::exception&) {
      usage_error("--", flag, " must be a number, got '", *args.get(flag), "'");
    }
  }
  const std::pair<const char*, const char*> integers[] = {{"top-k", "top_k"}, {"seed", "seed"}, {"max-tokens", "max_tokens"}};
  for (const auto& [flag, field] : integers) {
    if (!args.get(flag)) continue;
    try {
      size_t used = 0;
      const long long v = std::stoll(*args.get(flag), &used);
      if (used != args.get(flag)->size()) throw std::invalid_argument(flag);
      body[field] = v;
    } catch (const std::exception&) {
      usage_error("--", flag, " must be an integer, got '", *args.get(flag), "'");
    }
  }
  if (args.get("stop")) body["stop"] = *args.get("stop");
  const auto prompt = args.get("prompt"), messages = args.get("messages");
  if (bool(prompt) == bool(messages)) usage_error("give exactly one of --prompt S and --messages FILE");
  if (prompt) {
    body["prompt"] = *prompt;
  } else {
    const Json m = Json::parse(read_file_or_usage_error(*messages, "messages"), nullptr, false);
    if (m.is_discarded()) usage_error("--messages ", *messages, ": not valid JSON");
    body["messages"] = m;
    if (args.flag("thinking")) body["chat_template_kwargs"] = {{"thinking", true}};
  }
  return body;
}

}  // namespace

int run_generate(const std::vector<std::string>& argv) {
  std::set<std::string> valued = model_option_names();
  valued.insert({"prompt", "messages", "max-tokens", "temperature", "top-k", "top-p", "min-p", "presence-penalty",
                 "frequency-penalty", "repetition-penalty", "seed", "stop"});
  const Args args(argv, valued, {"stream", "thinking"});
  const Json body = request_body(args);
  const auto model = load_serving_model(args);
  const server::Endpoint endpoint = args.get("prompt") ? server::Endpoint::completions : server::Endpoint::chat;
  server::RequestLimits limits{"", model->config().max_position_embeddings, model->config().vocab_size, model->end_token_ids(), nullptr};
  server::OpenAiRequest request;
  try {
    request = server::read_request(endpoint, body, model->tokenizer(), limits);
  } catch (const server::ApiError& e) {
    usage_error(e.what());
  }
  const auto scheduler = make_scheduler(args, *model);
  auto stream = std::make_shared<server::TextStream>(model->tokenizer(), request.stop);
  const Scheduler::Submitted submitted = scheduler->submit(request.generation, stream);
  if (submitted.admission != Scheduler::Admission::accepted)
    usage_error("the prompt plus --max-tokens needs more cache blocks than --cache-blocks allows");

  const bool streaming = args.flag("stream");
  std::string text;
  server::TextStream::Update u;
  while (!u.finished) {
    u = stream->wait(std::chrono::seconds(1));
    text += u.text;
    if (streaming) std::cout << u.text << std::flush;
  }
  if (u.reason == FinishReason::error) runtime_error("generation failed: ", u.error);
  if (streaming || endpoint == server::Endpoint::completions) {
    if (!streaming) std::cout << text;
    std::cout << std::endl;
    return 0;
  }
  text::AssistantStream assistant(request.thinking_mode);
  const text::AssistantDelta d = assistant.push(text);
  const text::AssistantEnd end = assistant.finish();
  text::ParsedCompletion message{d.content + end.delta.content, d.reasoning + end.delta.reasoning, end.tool_calls, end.error};
  std::cout << text::to_json(message).dump(2, ' ', false, Json::error_handler_t::replace) << std::endl;
  return 0;
}

}  // namespace tetra
