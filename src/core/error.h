#pragma once
// Errors carry the process exit code of the CLI contract, so every layer can report a
// problem with the right category and the CLI only has to print and exit.
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace tetra {

enum class ExitCode : int { ok = 0, runtime = 1, usage = 2, model = 3 };

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

// Concatenates anything streamable: cat("tensor ", name, " has ", n, " dims").
template <class... Parts>
std::string cat(Parts&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Parts>(parts));
  return os.str();
}

// A checkpoint or model problem (exit code 3): the message names the file and tensor or field.
template <class... Parts>
[[noreturn]] void model_error(Parts&&... parts) {
  throw Error(ExitCode::model, cat(std::forward<Parts>(parts)...));
}

// A bad command line (exit code 2).
template <class... Parts>
[[noreturn]] void usage_error(Parts&&... parts) {
  throw Error(ExitCode::usage, cat(std::forward<Parts>(parts)...));
}

// Anything else that failed at run time (exit code 1).
template <class... Parts>
[[noreturn]] void runtime_error(Parts&&... parts) {
  throw Error(ExitCode::runtime, cat(std::forward<Parts>(parts)...));
}

}  // namespace tetra
