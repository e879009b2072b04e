#include "cli/read_file.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace tetra {

std::string read_file_or_usage_error(const std::string& path, const std::string& option) {
  std::ifstream in(path, std::ios::binary);
  if (!in) usage_error("--", option, ": cannot open '", path, "'");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) usage_error("--", option, ": cannot read '", path, "'");
  return bytes.str();
}

}  // namespace tetra
