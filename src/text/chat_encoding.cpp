#include "text/chat_encoding.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "text/dsml.h"
#include "text/python_json.h"
#include "text/v4_tokens.h"

namespace tetra::text {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kReasoningEffortMax =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root "
    "cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial "
    "scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";

const std::map<std::string, std::string, std::less<>> kTaskTokens = {
    {"action", "<｜action｜>"}, {"query", "<｜query｜>"},   {"authority", "<｜authority｜>"},
    {"domain", "<｜domain｜>"}, {"title", "<｜title｜>"}, {"read_url", "<｜read_url｜>"}};

std::string tools_section(const Json& tools) {
  std::string schemas;
  for (const Json& tool : tools) {
    if (!tool.contains("function")) usage_error("a tool has no 'function': ", tool.dump());
    if (!schemas.empty()) schemas += '\n';
    schemas += python_json_dumps(tool["function"]);
  }
  const std::string d(v4::kDsml);
  return "## Tools\n\n"
         "You have access to a set of tools to help answer the user's question. You can invoke tools by writing a \"<" +
         d + "tool_calls>\" block like the following:\n\n<" + d + "tool_calls>\n<" + d + "invoke name=\"$TOOL_NAME\">\n<" +
         d + "parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</" + d + "parameter>\n...\n</" +
         d + "invoke>\n<" + d + "invoke name=\"$TOOL_NAME2\">\n...\n</" + d + "invoke>\n</" + d +
         "tool_calls>\n\n"
         "String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, "
         "booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n"
         "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside "
         "<think>...</think> BEFORE any tool calls or final response.\n\n"
         "Otherwise, output directly after </think> with tool calls or final response.\n\n"
         "### Available Tool Schemas\n\n" +
         schemas + "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";
}

std::string response_format_section(const Json& format) {
  return "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n" + python_json_dumps(format);
}

// A field as text: missing or null reads as "" (as `x or ""` does in the reference).
std::string text_field(const Json& message, const char* key, size_t index) {
  if (!message.contains(key) || message[key].is_null()) return "";
  const Json& value = message[key];
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array()) {  // OpenAI content parts: the text parts, in order
    std::string text;
    for (const Json& part : value) {
      if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") || !part["text"].is_string())
        usage_error("messages[", index, "].", key, ": only text content parts are supported, got ", part.dump());
      text += part["text"].get<std::string>();
    }
    return text;
  }
  usage_error("messages[", index, "].", key, " must be a string, got ", value.dump());
}

bool non_empty(const Json& message, const char* key) {
  if (!message.contains(key)) return false;
  const Json& v = message[key];
  return !(v.is_null() || ((v.is_array() || v.is_object() || v.is_string()) && v.empty()) ||
           (v.is_boolean() && !v.get<bool>()));
}

std::string role_of(const Json& message) {
  return message.contains("role") && message["role"].is_string() ? message["role"].get<std::string>() : "";
}

// Tool results become <tool_result> blocks of user turns; consecutive user turns (and the tool
// results before them) merge into one turn.
Json merge_tool_messages(const Json& messages) {
  Json merged = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    if (!m.is_object()) usage_error("messages[", i, "] is not an object");
    // Checked here, where the index is the request's: the steps below index into tool_calls.
    if (non_empty(m, "tool_calls") && !m["tool_calls"].is_array())
      usage_error("messages[", i, "].tool_calls must be a list, got ", m["tool_calls"].dump());
    if (m.contains("wo_eos") && !m["wo_eos"].is_null() && !m["wo_eos"].is_boolean())
      usage_error("messages[", i, "].wo_eos must be true or false, got ", m["wo_eos"].dump());
    const std::string role = role_of(m);
    const bool previous_is_open_user = !merged.empty() && role_of(merged.back()) == "user" &&
                                       merged.back().contains("content_blocks");
    if (role == "tool") {
      Json block = {{"type", "tool_result"},
                    {"tool_use_id", m.contains("tool_call_id") && m["tool_call_id"].is_string() ? m["tool_call_id"] : Json("")},
                    {"content", m.contains("content") && !m["content"].is_null() ? m["content"] : Json("")}};
      if (previous_is_open_user) {
        merged.back()["content_blocks"].push_back(std::move(block));
      } else {
        merged.push_back({{"role", "user"}, {"content_blocks", Json::array({std::move(block)})}});
      }
    } else if (role == "user") {
      Json block = {{"type", "text"}, {"text", text_field(m, "content", i)}};
      if (previous_is_open_user && !merged.back().contains("task")) {
        merged.back()["content_blocks"].push_back(std::move(block));
      } else {
        Json user = {{"role", "user"}, {"content", block["text"]}, {"content_blocks", Json::array({block})}};
        for (const char* key : {"task", "wo_eos"})
          if (m.contains(key) && !m[key].is_null()) user[key] = m[key];
        merged.push_back(std::move(user));
      }
    } else {
      merged.push_back(m);
    }
  }
  return merged;
}

// Orders the tool results of each user turn like the calls of the assistant turn before it.
void sort_tool_results_by_call_order(Json& messages) {
  std::map<std::string, size_t> call_order;
  for (Json& m : messages) {
    const std::string role = role_of(m);
    if (role == "assistant" && non_empty(m, "tool_calls")) {
      call_order.clear();
      for (size_t i = 0; i < m["tool_calls"].size(); ++i) {
        const Json& call = m["tool_calls"][i];
        std::string id = call.contains("id") && call["id"].is_string() ? call["id"].get<std::string>() : "";
        if (id.empty() && call.contains("function") && call["function"].contains("id") && call["function"]["id"].is_string())
          id = call["function"]["id"].get<std::string>();
        if (!id.empty()) call_order[id] = i;
      }
    } else if (role == "user" && m.contains("content_blocks")) {
      Json& blocks = m["content_blocks"];
      std::vector<Json> results;
      for (const Json& b : blocks)
        if (b["type"] == "tool_result") results.push_back(b);
      if (results.size() < 2 || call_order.empty()) continue;
      auto order = [&](const Json& b) {
        auto it = call_order.find(b["tool_use_id"].get<std::string>());
        return it == call_order.end() ? size_t(0) : it->second;
      };
      std::stable_sort(results.begin(), results.end(), [&](const Json& a, const Json& b) { return order(a) < order(b); });
      size_t next = 0;
      for (Json& b : blocks)
        if (b["type"] == "tool_result") b = results[next++];
    }
  }
}

int last_user_index(const Json& messages) {
  for (int i = int(messages.size()) - 1; i >= 0; --i) {
    const std::string role = role_of(messages[i]);
    if (role == "user" || role == "developer") return i;
  }
  return -1;
}

// Before the last user turn: assistant turns lose their reasoning, developer turns go away.
Json drop_earlier_thinking(const Json& messages) {
  const int last_user = last_user_index(messages);
  Json kept = Json::array();
  for (int i = 0; i < int(messages.size()); ++i) {
    const Json& m = messages[i];
    const std::string role = role_of(m);
    if (role == "user" || role == "system" || role == "tool" || role == "latest_reminder" ||
        role == "direct_search_results" || i >= last_user) {
      kept.push_back(m);
    } else if (role == "assistant") {
      Json copy = m;
      copy.erase("reasoning_content");
      kept.push_back(std::move(copy));
    }
  }
  return kept;
}

std::string tool_result_text(const Json& content) {
  if (!content.is_array()) return content.is_string() ? content.get<std::string>() : python_json_dumps(content);
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    if (i) text += "\n\n";
    const Json& part = content[i];
    text += part.value("type", "") == "text" ? part.value("text", "") : "[Unsupported " + part.value("type", "") + "]";
  }
  return text;
}

std::string user_turn(const Json& m, size_t index) {
  std::string text(v4::kUser);
  if (!non_empty(m, "content_blocks")) return text + text_field(m, "content", index);
  const Json& blocks = m["content_blocks"];
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i) text += "\n\n";
    const Json& b = blocks[i];
    if (b["type"] == "text") {
      text += b["text"].get<std::string>();
    } else {
      text += "<tool_result>" + tool_result_text(b["content"]) + "</tool_result>";
    }
  }
  return text;
}

std::string tool_calls_block(const Json& calls, size_t index) {
  const std::string d(v4::kDsml);
  std::string invokes;
  for (const Json& call : calls) {
    if (!call.contains("function") || !call["function"].contains("name") || !call["function"]["name"].is_string())
      usage_error("messages[", index, "].tool_calls: a call needs a function with a string name, got ", call.dump());
    const Json& f = call["function"];
    if (!invokes.empty()) invokes += '\n';
    invokes += "<" + d + "invoke name=\"" + f["name"].get<std::string>() + "\">\n" +
               arguments_to_dsml(f.contains("arguments") ? f["arguments"] : Json("")) + "\n</" + d + "invoke>";
  }
  return "\n\n<" + d + "tool_calls>\n" + invokes + "\n</" + d + "tool_calls>";
}

struct Renderer {
  const Json& messages;
  const ChatOptions& options;
  bool drop_thinking;
  int last_user;

  bool thinking() const { return options.thinking_mode == ThinkingMode::thinking; }

  std::string system_extras(const Json& m) const {
    std::string text;
    if (non_empty(m, "tools")) text += "\n\n" + tools_section(m["tools"]);
    if (non_empty(m, "response_format")) text += "\n\n" + response_format_section(m["response_format"]);
    return text;
  }

  std::string assistant_turn(const Json& m, int index) const {
    std::string tool_calls = non_empty(m, "tool_calls") ? tool_calls_block(m["tool_calls"], index) : "";
    std::string reasoning;
    const bool after_task = index > 0 && messages[index - 1].contains("task") && !messages[index - 1]["task"].is_null();
    if (thinking() && !after_task && (!drop_thinking || index > last_user))
      reasoning = text_field(m, "reasoning_content", index) + std::string(v4::kThinkEnd);
    std::string text = reasoning + text_field(m, "content", index) + tool_calls;
    if (!m.contains("wo_eos") || m["wo_eos"] != true) text += v4::kEos;
    return text;
  }

  std::string render(int index) const {
    const Json& m = messages[index];
    const std::string role = role_of(m);
    std::string prompt;
    if (index == 0 && thinking() && options.reasoning_effort == "max") prompt += kReasoningEffortMax;

    if (role == "system") {
      prompt += text_field(m, "content", index) + system_extras(m);
    } else if (role == "developer") {
      const std::string content = text_field(m, "content", index);
      if (content.empty()) usage_error("messages[", index, "]: a developer message needs content");
      prompt += std::string(v4::kUser) + content + system_extras(m);
    } else if (role == "user") {
      prompt += user_turn(m, index);
    } else if (role == "latest_reminder") {
      prompt += std::string(v4::kLatestReminder) + text_field(m, "content", index);
    } else if (role == "assistant") {
      prompt += assistant_turn(m, index);
    } else {
      usage_error("messages[", index, "].role '", role, "' is not one of system, user, developer, assistant, tool, latest_reminder");
    }

    // What the next turn starts with, unless the next message brings its own opening.
    if (index + 1 < int(messages.size())) {
      const std::string next = role_of(messages[index + 1]);
      if (next != "assistant" && next != "latest_reminder") return prompt;
    }
    if (m.contains("task") && !m["task"].is_null()) {
      const std::string task = m["task"].is_string() ? m["task"].get<std::string>() : m["task"].dump();
      auto it = kTaskTokens.find(task);
      if (it == kTaskTokens.end())
        usage_error("messages[", index, "].task '", task, "' is not one of action, query, authority, domain, title, read_url");
      if (task == "action") {
        prompt += std::string(v4::kAssistant) + std::string(thinking() ? v4::kThinkStart : v4::kThinkEnd);
      }
      prompt += it->second;
    } else if (role == "user" || role == "developer") {
      prompt += v4::kAssistant;
      const bool open_thinking = thinking() && (!drop_thinking || index >= last_user);
      prompt += open_thinking ? v4::kThinkStart : v4::kThinkEnd;
    }
    return prompt;
  }
};

}  // namespace

ThinkingMode parse_thinking_mode(std::string_view name, std::string_view where) {
  if (name == "chat") return ThinkingMode::chat;
  if (name == "thinking") return ThinkingMode::thinking;
  usage_error(where, " must be \"chat\" or \"thinking\", got '", name, "'");
}

std::string encode_chat(const Json& messages, const ChatOptions& options) {
  if (!messages.is_array()) usage_error("messages must be an array");
  if (options.reasoning_effort && *options.reasoning_effort != "max" && *options.reasoning_effort != "high")
    usage_error("reasoning_effort must be \"max\", \"high\" or null, got '", *options.reasoning_effort, "'");

  Json merged = merge_tool_messages(messages);
  sort_tool_results_by_call_order(merged);

  // Tool definitions anywhere keep all reasoning: tool-calling turns depend on it.
  bool drop = options.drop_thinking;
  for (const Json& m : merged)
    if (non_empty(m, "tools")) drop = false;
  if (options.thinking_mode == ThinkingMode::thinking && drop) merged = drop_earlier_thinking(merged);

  std::string prompt = options.add_bos ? std::string(v4::kBos) : "";
  const Renderer renderer{merged, options, drop, last_user_index(merged)};
  for (int i = 0; i < int(merged.size()); ++i) prompt += renderer.render(i);
  return prompt;
}

}  // namespace tetra::text
