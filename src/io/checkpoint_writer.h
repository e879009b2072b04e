#pragma once
// Writes a checkpoint directory atomically: tensors go into shards of a bounded size inside a
// temporary sibling directory, which is renamed to the final name only by commit(). A failure
// (or an exception) before commit() removes the temporary directory, so nothing that looks
// like a complete checkpoint is ever left behind.
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"

namespace tetra {

class CheckpointWriter {
 public:
  // Fails if `final_dir` already exists.
  CheckpointWriter(std::string final_dir, uint64_t shard_bytes);
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  void add(const std::string& name, DType dtype, Shape shape, std::vector<std::byte> data);
  void write_file(const std::string& filename, const std::string& content);
  void copy_file(const std::string& source_path);  // keeps the file name
  // Writes the last shard and the index, then renames into place.
  void commit();

 private:
  void flush_shard();
  size_t current_shard_index() const { return written_shards_; }

  std::string final_dir_;
  std::string temp_dir_;
  uint64_t shard_bytes_;
  SafetensorsWriter current_;
  std::vector<std::vector<std::byte>> current_data_;
  uint64_t current_size_ = 0;
  std::vector<std::vector<std::string>> shard_tensors_;  // tensor names of each written shard
  size_t written_shards_ = 0;
  uint64_t total_bytes_ = 0;
  bool committed_ = false;
};

}  // namespace tetra
