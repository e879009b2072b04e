#pragma once
// Whole-file reads for commands that take a file argument.
#include <string>

namespace tetra {

// The bytes of `path`; throws a usage error naming `option` and the path if it cannot be read.
std::string read_file_or_usage_error(const std::string& path, const std::string& option);

}  // namespace tetra
