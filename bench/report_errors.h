#pragma once
// The kernel benchmarks' main: an error (no device, a failed CUDA call) is printed with the
// benchmark's name and exits 1, rather than ending in an uncaught exception's abort.
#include <cstdio>
#include <exception>

template <class Run>
int report_errors(const char* name, Run run) {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}
