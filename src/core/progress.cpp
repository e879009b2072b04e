#include "core/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace tetra {

Progress::Progress(std::string label, int64_t total)
    : label_(std::move(label)), total_(std::max<int64_t>(total, 1)), tty_(::isatty(STDERR_FILENO)) {}

Progress::~Progress() {
  if (tty_ && done_ > 0) std::fputc('\n', stderr);
}

void Progress::step(const std::string& item) {
  ++done_;
  draw(item);
}

void Progress::draw(const std::string& item) {
  const int percent = int(done_ * 100 / total_);
  if (tty_) {
    constexpr int kWidth = 30;
    const int filled = percent * kWidth / 100;
    std::fprintf(stderr, "\r%s [%.*s%*s] %3d%% (%lld/%lld) %-48.48s", label_.c_str(), filled,
                 "==============================", kWidth - filled, "", percent, (long long)done_, (long long)total_,
                 item.c_str());
  } else if (percent / 10 != last_decile_) {
    last_decile_ = percent / 10;
    std::fprintf(stderr, "%s: %3d%% (%lld/%lld) %s\n", label_.c_str(), percent, (long long)done_, (long long)total_,
                 item.c_str());
  }
  std::fflush(stderr);
}

}  // namespace tetra
