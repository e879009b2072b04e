#pragma once
// The command line of the kernel benchmarks that write JSON: `[--json FILE]`.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

// FILE, or empty without --json; anything else prints the usage and exits with status 2.
inline std::string json_option(int argc, char** argv) {
  std::string path;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--json FILE]\n", argv[0]);
      std::exit(2);
    }
  }
  return path;
}
