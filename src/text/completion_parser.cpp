#include "text/completion_parser.h"

#include <initializer_list>

#include "text/dsml.h"
#include "text/v4_tokens.h"

namespace tetra::text {
namespace {

// A format violation, caught inside parse_completion and turned into ParsedCompletion::error.
struct FormatError {
  std::string message;
};

struct Stop {
  size_t next;            // position after the stop string (or the end of the text)
  std::string_view read;  // text before it
  std::string_view stop;  // which stop string was found; empty if none
};

// Reads from `pos` up to the earliest of `stops`.
Stop read_until(std::string_view text, size_t pos, std::initializer_list<std::string_view> stops) {
  size_t best = text.size();
  std::string_view found;
  for (std::string_view s : stops) {
    const size_t at = text.find(s, pos);
    if (at != std::string_view::npos && at < best) {
      best = at;
      found = s;
    }
  }
  if (found.empty()) return {text.size(), text.substr(pos), {}};
  return {best + found.size(), text.substr(pos, best - pos), found};
}

const std::string kInvoke = "<" + std::string(v4::kDsml) + "invoke";
const std::string kInvokeEnd = "</" + std::string(v4::kDsml) + "invoke";
const std::string kParameter = "<" + std::string(v4::kDsml) + "parameter";
const std::string kParameterEnd = "/" + std::string(v4::kDsml) + "parameter";
const std::string kToolCallsStart = "\n\n<" + std::string(v4::kDsml) + "tool_calls";
const std::string kToolCallsEnd = "</" + std::string(v4::kDsml) + "tool_calls>";

bool is_python_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }

// `name="X">\n` after optional whitespace (one more trailing newline is tolerated, as the
// reference's `$` does).
std::string invoke_name(std::string_view header) {
  std::string_view rest = header;
  while (!rest.empty() && is_python_space(rest.front())) rest.remove_prefix(1);
  constexpr std::string_view kOpen = "name=\"";
  if (rest.starts_with(kOpen)) {
    for (std::string_view close : {std::string_view("\">\n"), std::string_view("\">\n\n")}) {
      if (rest.size() >= kOpen.size() + close.size() && rest.ends_with(close))
        return std::string(rest.substr(kOpen.size(), rest.size() - kOpen.size() - close.size()));
    }
  }
  throw FormatError{"Tool name format error: '" + std::string(header) + "'"};
}

// ` name="K" string="true|false">V<` (or with one trailing newline); K is the shortest name
// that leaves a valid rest, as the reference's non-greedy match.
DsmlParameter parameter(std::string_view body) {
  const FormatError fail{"Parameter format error: '" + std::string(body) + "'"};
  constexpr std::string_view kOpen = " name=\"";
  const std::string_view close = body.ends_with("<\n") ? "<\n" : "<";
  if (!body.starts_with(kOpen) || !body.ends_with(close)) throw fail;
  const std::string_view rest = body.substr(kOpen.size(), body.size() - kOpen.size() - close.size());
  size_t best = std::string_view::npos, marker_size = 0;
  bool is_string = false;
  for (auto [marker, flag] : {std::pair{std::string_view("\" string=\"true\">"), true},
                              std::pair{std::string_view("\" string=\"false\">"), false}}) {
    const size_t at = rest.find(marker);
    if (at < best) {
      best = at;
      marker_size = marker.size();
      is_string = flag;
    }
  }
  if (best == std::string_view::npos) throw fail;
  return {std::string(rest.substr(0, best)), std::string(rest.substr(best + marker_size)), is_string};
}

// The tool calls after "\n\n<｜DSML｜tool_calls"; returns where parsing stopped and the last stop.
Stop parse_tool_calls(std::string_view text, size_t pos, std::vector<ParsedToolCall>& calls) {
  Stop s{pos, {}, {}};
  while (s.next < text.size()) {
    s = read_until(text, s.next, {kInvoke, kToolCallsEnd});
    if (s.read != ">\n") throw FormatError{"Tool call format error: expected '>\\n' but got '" + std::string(s.read) + "'"};
    if (s.stop == kToolCallsEnd) break;
    if (s.stop.empty()) throw FormatError{"Missing special token in tool calls"};

    s = read_until(text, s.next, {kParameter, kInvokeEnd});
    ParsedToolCall call{invoke_name(s.read), {}};
    std::vector<DsmlParameter> parameters;
    while (s.stop == kParameter) {
      s = read_until(text, s.next, {kParameterEnd});
      DsmlParameter p = parameter(s.read);
      for (const DsmlParameter& q : parameters)
        if (q.name == p.name) throw FormatError{"Duplicate parameter name: '" + p.name + "'"};
      parameters.push_back(std::move(p));
      s = read_until(text, s.next, {kParameter, kInvokeEnd});
      if (s.read != ">\n")
        throw FormatError{"Parameter format error: expected '>\\n' but got '" + std::string(s.read) + "'"};
    }
    call.arguments = dsml_to_arguments(parameters);
    calls.push_back(std::move(call));
  }
  return s;
}

ParsedCompletion parse_strict(std::string_view text, ThinkingMode mode) {
  ParsedCompletion out;
  size_t pos = 0;
  if (mode == ThinkingMode::thinking) {
    const Stop s = read_until(text, pos, {v4::kThinkEnd, kToolCallsStart});
    if (s.stop != v4::kThinkEnd) throw FormatError{"Invalid thinking format: missing </think>"};
    out.reasoning_content = s.read;
    pos = s.next;
  }
  Stop s = read_until(text, pos, {v4::kEos, kToolCallsStart});
  out.content = s.read;
  if (s.stop == kToolCallsStart) {
    s = parse_tool_calls(text, s.next, out.tool_calls);
    s = read_until(text, s.next, {v4::kEos});
    if (!s.read.empty()) throw FormatError{"Unexpected content after tool calls"};
  } else if (s.stop != v4::kEos) {
    throw FormatError{"Invalid format: missing EOS token"};
  }
  if (s.next != text.size() || !(s.stop == v4::kEos || s.stop.empty())) throw FormatError{"Unexpected content at end"};
  for (std::string_view token : {v4::kBos, v4::kEos, v4::kThinkStart, v4::kThinkEnd, v4::kDsml}) {
    if (out.content.find(token) != std::string::npos || out.reasoning_content.find(token) != std::string::npos)
      throw FormatError{"Unexpected special token '" + std::string(token) + "' in content"};
  }
  return out;
}

}  // namespace

ParsedCompletion parse_completion(std::string_view text, ThinkingMode mode) {
  try {
    return parse_strict(text, mode);
  } catch (const FormatError& e) {
    ParsedCompletion fallback;
    fallback.error = e.message;
    std::string_view rest = text;
    if (mode == ThinkingMode::thinking) {
      if (const size_t end = rest.find(v4::kThinkEnd); end != std::string_view::npos) {
        fallback.reasoning_content = rest.substr(0, end);
        rest.remove_prefix(end + v4::kThinkEnd.size());
      }
    }
    if (rest.ends_with(v4::kEos)) rest.remove_suffix(v4::kEos.size());
    fallback.content = rest;
    return fallback;
  }
}

nlohmann::ordered_json to_json(const ParsedCompletion& parsed) {
  nlohmann::ordered_json calls = nlohmann::ordered_json::array();
  for (const ParsedToolCall& c : parsed.tool_calls)
    calls.push_back({{"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  nlohmann::ordered_json out = {{"role", "assistant"},
                                {"content", parsed.content},
                                {"reasoning_content", parsed.reasoning_content},
                                {"tool_calls", std::move(calls)}};
  if (parsed.error) out["error"] = *parsed.error;
  return out;
}

}  // namespace tetra::text
