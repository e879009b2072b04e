#include "text/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "text/utf8.h"

namespace tetra::text {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

// Deep backtracking over long runs (e.g. `\s+(?!\S)` on thousands of spaces) needs more than
// the 32 KiB default JIT stack.
constexpr size_t kJitStackStart = 32 * 1024;
constexpr size_t kJitStackMax = 8 * 1024 * 1024;

// Oniguruma (the library's engine) takes \s to be Unicode White_Space; PCRE2's \s also
// matches U+180E. Spelling the class out keeps both engines on the same characters.
constexpr std::string_view kWhiteSpaceClassBody = R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// Rewrites \s and \S of an Oniguruma pattern into explicit classes for PCRE2.
std::string translate_oniguruma(std::string_view pattern, std::string_view where) {
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's') {
        out += in_class ? std::string(kWhiteSpaceClassBody) : cat("[", kWhiteSpaceClassBody, "]");
      } else if (e == 'S') {
        if (in_class) model_error(where, ": pattern '", pattern, "' uses \\S inside a character class, which is not supported");
        out += cat("[^", kWhiteSpaceClassBody, "]");
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

void RegexScratch::Free::operator()(pcre2_match_data* p) const { pcre2_match_data_free(p); }
void RegexScratch::Free::operator()(pcre2_match_context* p) const { pcre2_match_context_free(p); }
void RegexScratch::Free::operator()(pcre2_jit_stack* p) const { pcre2_jit_stack_free(p); }
void Regex::Free::operator()(pcre2_code* p) const { pcre2_code_free(p); }

RegexScratch::RegexScratch()
    : match_data_(pcre2_match_data_create(1, nullptr)),
      match_context_(pcre2_match_context_create(nullptr)),
      jit_stack_(pcre2_jit_stack_create(kJitStackStart, kJitStackMax, nullptr)) {
  if (!match_data_ || !match_context_ || !jit_stack_) runtime_error("out of memory creating regex match state");
  pcre2_jit_stack_assign(match_context_.get(), nullptr, jit_stack_.get());
}

Regex::Regex(std::string_view pattern, Syntax syntax, std::string_view where) : pattern_(pattern) {
  uint32_t options = PCRE2_UTF;
  std::string compiled;
  if (syntax == Syntax::literal) {
    options |= PCRE2_LITERAL;  // Unicode properties do not apply to a literal (PCRE2 rejects UCP here)
    compiled = pattern;
  } else {
    options |= PCRE2_UCP;
    compiled = translate_oniguruma(pattern, where);
  }
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(), options, &error, &offset,
                            nullptr));
  if (!code_) model_error(where, ": pattern '", pattern, "' does not compile at offset ", offset, ": ", pcre2_message(error));
  jit_ = pcre2_jit_compile(code_.get(), PCRE2_JIT_COMPLETE) == 0;
}

void Regex::find_all(std::string_view subject, RegexScratch& scratch, std::vector<MatchSpan>& out) const {
  const auto* data = reinterpret_cast<PCRE2_SPTR>(subject.data());
  pcre2_match_data* md = scratch.match_data();
  size_t start = 0;
  while (start <= subject.size()) {
    const int rc = jit_ ? pcre2_jit_match(code_.get(), data, subject.size(), start, 0, md, scratch.match_context())
                        : pcre2_match(code_.get(), data, subject.size(), start, PCRE2_NO_UTF_CHECK, md,
                                      scratch.match_context());
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) runtime_error("regex '", pattern_, "' failed on a ", subject.size(), "-byte piece: ", pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(md);
    const size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      out.push_back({begin, end});
      start = end;
    } else {  // an empty match: step over one character so the scan moves on
      if (begin >= subject.size()) return;
      start = begin + utf8_sequence_length(static_cast<unsigned char>(subject[begin]));
    }
  }
}

}  // namespace tetra::text
