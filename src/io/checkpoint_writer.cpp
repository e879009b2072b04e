#include "io/checkpoint_writer.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tetra {
namespace fs = std::filesystem;

namespace {
std::string shard_name(size_t i, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}
}  // namespace

CheckpointWriter::CheckpointWriter(std::string final_dir, uint64_t shard_bytes)
    : final_dir_(std::move(final_dir)), shard_bytes_(shard_bytes) {
  while (final_dir_.size() > 1 && final_dir_.back() == '/') final_dir_.pop_back();
  if (fs::exists(final_dir_)) usage_error(final_dir_, ": already exists; choose a new output directory");
  temp_dir_ = final_dir_ + ".partial-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(temp_dir_, ec);
  if (!fs::create_directories(temp_dir_, ec) || ec) runtime_error(temp_dir_, ": cannot create: ", ec.message());
}

CheckpointWriter::~CheckpointWriter() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(temp_dir_, ec);
  }
}

void CheckpointWriter::add(const std::string& name, DType dtype, Shape shape, std::vector<std::byte> data) {
  if (current_size_ > 0 && current_size_ + data.size() > shard_bytes_) flush_shard();
  current_size_ += data.size();
  current_data_.push_back(std::move(data));
  current_.add(name, dtype, std::move(shape), current_data_.back());
  if (shard_tensors_.size() <= current_shard_index()) shard_tensors_.resize(current_shard_index() + 1);
  shard_tensors_[current_shard_index()].push_back(name);
}

void CheckpointWriter::flush_shard() {
  const size_t index = written_shards_;
  total_bytes_ += current_.write((fs::path(temp_dir_) / ("shard-" + std::to_string(index) + ".safetensors")).string());
  ++written_shards_;
  current_ = SafetensorsWriter();
  current_data_.clear();
  current_size_ = 0;
}

void CheckpointWriter::write_file(const std::string& filename, const std::string& content) {
  std::ofstream out(fs::path(temp_dir_) / filename, std::ios::binary);
  out << content;
  if (!out) runtime_error(temp_dir_, "/", filename, ": write failed");
}

void CheckpointWriter::copy_file(const std::string& source_path) {
  std::error_code ec;
  fs::copy_file(source_path, fs::path(temp_dir_) / fs::path(source_path).filename(), ec);
  if (ec) runtime_error(source_path, ": cannot copy: ", ec.message());
}

void CheckpointWriter::commit() {
  if (current_size_ > 0 || written_shards_ == 0) flush_shard();
  const size_t n = written_shards_;
  const fs::path dir(temp_dir_);
  if (n == 1) {
    fs::rename(dir / "shard-0.safetensors", dir / "model.safetensors");
  } else {
    nlohmann::json index = {{"metadata", {{"total_size", total_bytes_}}}, {"weight_map", nlohmann::json::object()}};
    for (size_t i = 0; i < n; ++i) {
      fs::rename(dir / ("shard-" + std::to_string(i) + ".safetensors"), dir / shard_name(i, n));
      for (const auto& t : shard_tensors_[i]) index["weight_map"][t] = shard_name(i, n);
    }
    write_file("model.safetensors.index.json", index.dump(2));
  }
  std::error_code ec;
  fs::rename(temp_dir_, final_dir_, ec);
  if (ec) runtime_error("cannot move ", temp_dir_, " to ", final_dir_, ": ", ec.message());
  committed_ = true;
}

}  // namespace tetra
