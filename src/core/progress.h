#pragma once
// A progress bar on stderr for long CLI work: redrawn in place on a terminal, one line per 10%
// when stderr is a file or pipe (so CI logs stay short).
#include <cstdint>
#include <string>

namespace tetra {

class Progress {
 public:
  Progress(std::string label, int64_t total);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void step(const std::string& item);  // one unit done; `item` names what is being worked on

 private:
  void draw(const std::string& item);

  std::string label_;
  int64_t total_;
  int64_t done_ = 0;
  int last_decile_ = -1;
  bool tty_;
};

}  // namespace tetra
