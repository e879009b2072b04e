#pragma once
// A compiled PCRE2 pattern (UTF + Unicode properties, JIT when available) that lists the
// matches in a subject. Patterns are written for Oniguruma, the engine of the Hugging Face
// library, and translated where the two engines differ.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct pcre2_real_code_8;
struct pcre2_real_match_data_8;
struct pcre2_real_match_context_8;
struct pcre2_real_jit_stack_8;

namespace tetra::text {

struct MatchSpan {
  size_t begin;
  size_t end;
};

// Per-thread matching state (match data and JIT stack), reused across calls of one encode.
class RegexScratch {
 public:
  RegexScratch();
  pcre2_real_match_data_8* match_data() const { return match_data_.get(); }
  pcre2_real_match_context_8* match_context() const { return match_context_.get(); }

 private:
  struct Free {
    void operator()(pcre2_real_match_data_8* p) const;
    void operator()(pcre2_real_match_context_8* p) const;
    void operator()(pcre2_real_jit_stack_8* p) const;
  };
  std::unique_ptr<pcre2_real_match_data_8, Free> match_data_;
  std::unique_ptr<pcre2_real_match_context_8, Free> match_context_;
  std::unique_ptr<pcre2_real_jit_stack_8, Free> jit_stack_;
};

class Regex {
 public:
  enum class Syntax { oniguruma, literal };
  // Throws a model error naming `where` and the pattern if it does not compile.
  Regex(std::string_view pattern, Syntax syntax, std::string_view where);

  // Appends the non-empty matches in `subject`, left to right and non-overlapping. The subject
  // must be valid UTF-8 (checked once by the caller).
  void find_all(std::string_view subject, RegexScratch& scratch, std::vector<MatchSpan>& out) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Free {
    void operator()(pcre2_real_code_8* p) const;
  };
  std::string pattern_;
  std::unique_ptr<pcre2_real_code_8, Free> code_;
  bool jit_ = false;
};

}  // namespace tetra::text
