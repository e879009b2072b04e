// tetra render-chat / tetra parse-completion: the DeepSeek-V4 chat format on the command line.
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/read_file.h"
#include "core/error.h"
#include "text/chat_encoding.h"
#include "text/completion_parser.h"
#include "text/python_json.h"

namespace tetra {
namespace {

// The options of a request file: {"messages", "thinking_mode", "reasoning_effort", "drop_thinking"}.
text::ChatOptions request_options(const nlohmann::ordered_json& request, const std::string& path) {
  text::ChatOptions options;
  const std::string where = path + ": thinking_mode";
  if (request.contains("thinking_mode")) {
    if (!request["thinking_mode"].is_string()) usage_error(where, " must be a string");
    options.thinking_mode = text::parse_thinking_mode(request["thinking_mode"].get<std::string>(), where);
  }
  if (request.contains("reasoning_effort") && !request["reasoning_effort"].is_null()) {
    if (!request["reasoning_effort"].is_string()) usage_error(path, ": reasoning_effort must be a string or null");
    options.reasoning_effort = request["reasoning_effort"].get<std::string>();
  }
  if (request.contains("drop_thinking")) {
    if (!request["drop_thinking"].is_boolean()) usage_error(path, ": drop_thinking must be true or false");
    options.drop_thinking = request["drop_thinking"].get<bool>();
  }
  return options;
}

}  // namespace

int run_render_chat(const std::vector<std::string>& argv) {
  const Args args(argv, {"request"}, {});
  const std::string path = args.required("request");
  nlohmann::ordered_json request;
  try {
    request = nlohmann::ordered_json::parse(read_file_or_usage_error(path, "request"));
  } catch (const nlohmann::json::exception& e) {
    usage_error(path, ": invalid JSON: ", e.what());
  }
  if (!request.is_object() || !request.contains("messages")) usage_error(path, ": expected an object with \"messages\"");
  std::cout << text::encode_chat(request["messages"], request_options(request, path));
  return 0;
}

int run_parse_completion(const std::vector<std::string>& argv) {
  const Args args(argv, {"thinking-mode"}, {});
  const auto mode = text::parse_thinking_mode(args.required("thinking-mode"), "--thinking-mode");
  const std::string completion(std::istreambuf_iterator<char>(std::cin), {});
  std::cout << text::python_json_dumps(text::to_json(text::parse_completion(completion, mode))) << "\n";
  return 0;
}

}  // namespace tetra
