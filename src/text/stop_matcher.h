#pragma once
// Stop strings over streamed text: text that could still be the start of a stop string is
// held back until the next chunk decides, so a stop string split across tokens is found and
// never leaks into the output.
#include <string>
#include <string_view>
#include <vector>

namespace tetra::text {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // The text that is safe to release after `chunk`. When a stop string completes, returns the
  // text before it and stopped() becomes true (the stop string itself is dropped).
  std::string push(std::string_view chunk);
  // The held text, at the end of the sequence.
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace tetra::text
