#pragma once
// safetensors files: a validated reader over mmap, a checkpoint view over one file or a
// sharded set with model.safetensors.index.json, and a writer.
//
// Format: u64 little-endian header length N, N bytes of JSON {name: {dtype, shape,
// data_offsets: [begin, end]}, "__metadata__": {str: str}}, then the data; offsets are
// relative to the first byte after the header.
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "io/mapped_file.h"

namespace tetra {

inline constexpr uint64_t kMaxSafetensorsHeader = 100ull << 20;  // as the reference library

struct SafetensorsEntry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0;  // relative to the data section
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  // Maps the file and validates its header; throws a model Error naming the file and tensor.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_.path(); }
  uint64_t file_size() const { return file_.size(); }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  TensorView view(const SafetensorsEntry& e) const;

 private:
  MappedFile file_;
  uint64_t data_start_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Every tensor of a checkpoint directory: `model.safetensors.index.json` and its shards when
// the index exists, otherwise every *.safetensors file in the directory.
class TensorStore {
 public:
  explicit TensorStore(const std::string& dir);

  struct Located {
    const SafetensorsFile* file;
    const SafetensorsEntry* entry;
  };
  const Located* find(const std::string& name) const;
  TensorView view(const Located& l) const { return l.file->view(*l.entry); }
  // Tensor names in a stable order (file order, then header order).
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::unordered_map<std::string, Located> by_name_;
  std::vector<std::string> names_;
};

// Writes a safetensors file. A tensor added without data becomes a hole (sparse on file
// systems that support it): used for header-only replicas of large checkpoints.
class SafetensorsWriter {
 public:
  void add(std::string name, DType dtype, Shape shape, std::span<const std::byte> data);
  void add_hole(std::string name, DType dtype, Shape shape);
  void set_metadata(std::string key, std::string value) { metadata_[std::move(key)] = std::move(value); }
  // Writes everything; returns the file's size.
  uint64_t write(const std::string& path) const;

 private:
  struct Pending {
    std::string name;
    DType dtype;
    Shape shape;
    std::span<const std::byte> data;  // empty for a hole
    uint64_t nbytes;
  };
  std::vector<Pending> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace tetra
