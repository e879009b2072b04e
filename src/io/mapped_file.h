#pragma once
// Read-only memory map of a whole file (RAII). Mapping reads nothing: pages come in on first
// touch, so opening a checkpoint costs only the pages of its headers.
#include <cstddef>
#include <cstdint>
#include <string>

namespace tetra {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const std::byte* data_ = nullptr;
  uint64_t size_ = 0;
};

// The bytes of a whole file, with MappedFile's errors: anything but a regular file (a FIFO, a
// directory) is a model error naming it.
std::string read_regular_file(const std::string& path);

// Whether the directory entry `path` is there at all, without following it: a link that leads
// nowhere (dangling, or in a loop) counts, so that reading it fails naming it rather than the
// file being taken as absent (std::filesystem::exists says no to the one and throws on the other).
bool entry_exists(const std::string& path);

}  // namespace tetra
