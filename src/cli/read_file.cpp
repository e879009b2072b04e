#include "cli/read_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace tetra {

std::string read_file_or_usage_error(const std::string& path, const std::string& option) {
  // A directory opens but cannot be read (which the stream hides); a pipe is fine.
  if (std::error_code ec; std::filesystem::is_directory(path, ec))
    usage_error("--", option, ": '", path, "' is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) usage_error("--", option, ": cannot open '", path, "'");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) usage_error("--", option, ": cannot read '", path, "'");
  return bytes.str();
}

}  // namespace tetra
