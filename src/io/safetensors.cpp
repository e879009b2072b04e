#include "io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "core/error.h"
#include "io/json_file.h"

namespace tetra {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

uint64_t read_u64_le(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | uint64_t(p[i]);
  return v;
}

SafetensorsEntry parse_entry(const std::string& path, const std::string& name, const json& j,
                             uint64_t data_size) {
  auto bad = [&](const auto&... why) -> void { model_error(path, ": tensor '", name, "': ", why...); };
  if (!j.is_object()) bad("header entry is not an object");
  for (const auto& [key, _] : j.items())
    if (key != "dtype" && key != "shape" && key != "data_offsets") bad("unexpected header field '", key, "'");
  if (!j.contains("dtype") || !j["dtype"].is_string()) bad("missing or non-string 'dtype'");
  if (!j.contains("shape") || !j["shape"].is_array()) bad("missing or non-array 'shape'");
  if (!j.contains("data_offsets") || !j["data_offsets"].is_array() || j["data_offsets"].size() != 2)
    bad("'data_offsets' must be [begin, end]");

  SafetensorsEntry e;
  e.name = name;
  const std::string dtype = j["dtype"].get<std::string>();
  const auto dt = dtype_from_name(dtype);
  if (!dt) bad("unknown dtype '", dtype, "'");
  e.dtype = *dt;

  // The product of the nonzero dimensions must fit in int64 too: shape_numel multiplies left to
  // right, so [2^62, 2, 0] (no bytes) would overflow before it reaches the zero.
  uint64_t numel = 1, nonzero = 1;
  for (const auto& d : j["shape"]) {
    if (!d.is_number_unsigned()) bad("shape ", j["shape"].dump(), " has a non-integer or negative dimension");
    const uint64_t v = d.get<uint64_t>();
    if (v > uint64_t(INT64_MAX) || (v && nonzero > uint64_t(INT64_MAX) / v)) bad("shape ", j["shape"].dump(), " overflows");
    if (v) nonzero *= v;
    numel *= v;
    e.shape.push_back(int64_t(v));
  }
  for (const auto& o : j["data_offsets"])
    if (!o.is_number_unsigned()) bad("data_offsets ", j["data_offsets"].dump(), " are not non-negative integers");
  e.begin = j["data_offsets"][0].get<uint64_t>();
  e.end = j["data_offsets"][1].get<uint64_t>();
  if (e.begin > e.end) bad("data_offsets ", j["data_offsets"].dump(), " end before they begin");
  if (e.end > data_size)
    bad("data_offsets ", j["data_offsets"].dump(), " reach past the end of the file (data section is ",
        data_size, " bytes)");
  const auto nbytes = dtype_bytes(e.dtype, numel);
  if (!nbytes) bad("shape ", shape_str(e.shape), " of ", dtype, " does not fill whole bytes");
  if (*nbytes != e.end - e.begin)
    bad("holds ", e.end - e.begin, " bytes but shape ", shape_str(e.shape), " of ", dtype, " needs ", *nbytes);
  return e;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  if (file_.size() < 8) model_error(path, ": file is ", file_.size(), " bytes, too short for a safetensors header");
  const uint64_t header_len = read_u64_le(file_.data());
  if (header_len > kMaxSafetensorsHeader)
    model_error(path, ": header length ", header_len, " exceeds the ", kMaxSafetensorsHeader, "-byte limit");
  if (header_len > file_.size() - 8)
    model_error(path, ": header length ", header_len, " is longer than the file (", file_.size(), " bytes)");
  data_start_ = 8 + header_len;
  const uint64_t data_size = file_.size() - data_start_;

  const std::string_view text(reinterpret_cast<const char*>(file_.data() + 8), header_len);
  std::unordered_set<std::string> names;
  const json header = parse_json(text, path + ": header", [&](int depth, const std::string& key) {
    if (depth == 1 && !names.insert(key).second) model_error(path, ": tensor '", key, "' appears twice in the header");
  });
  if (!header.is_object()) model_error(path, ": header is not a JSON object");

  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) model_error(path, ": '__metadata__' is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) model_error(path, ": metadata field '", k, "' is not a string");
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    entries_.push_back(parse_entry(path, name, value, data_size));
  }

  // No two tensors may share bytes. Sorting by begin lets each tensor be checked against the
  // previous one that holds data.
  std::vector<const SafetensorsEntry*> by_offset;
  for (const auto& e : entries_)
    if (e.end > e.begin) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      model_error(path, ": tensors '", by_offset[i - 1]->name, "' and '", by_offset[i]->name,
                  "' overlap in the data section");
  // Header order is JSON key order; keep the file's data order instead, which is what a
  // reader streaming the file would see.
  std::stable_sort(entries_.begin(), entries_.end(),
                   [](const auto& a, const auto& b) { return a.begin < b.begin; });
}

TensorView SafetensorsFile::view(const SafetensorsEntry& e) const {
  return TensorView{e.dtype, e.shape, file_.data() + data_start_ + e.begin, e.end - e.begin};
}

TensorStore::TensorStore(const std::string& dir) {
  if (!fs::is_directory(dir)) model_error(dir, ": not a directory");
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  std::vector<std::string> shard_names;
  std::unordered_map<std::string, std::string> index_map;  // tensor -> shard file name
  if (entry_exists(index_path.string())) {
    bool in_weight_map = false;
    std::unordered_set<std::string> listed;
    const json index = read_json_file(index_path.string(), [&](int depth, const std::string& key) {
      if (depth == 1) in_weight_map = key == "weight_map";
      if (depth == 2 && in_weight_map && !listed.insert(key).second)
        model_error(index_path.string(), ": weight_map lists tensor '", key, "' twice");
    });
    if (!index.is_object()) model_error(index_path.string(), ": not a JSON object");
    if (!index.contains("weight_map") || !index["weight_map"].is_object())
      model_error(index_path.string(), ": missing object field 'weight_map'");
    for (const auto& [tensor, shard] : index["weight_map"].items()) {
      if (!shard.is_string()) model_error(index_path.string(), ": weight_map entry '", tensor, "' is not a file name");
      const std::string s = shard.get<std::string>();
      if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..")
        model_error(index_path.string(), ": weight_map entry '", tensor, "' names an invalid shard '", s, "'");
      index_map[tensor] = s;
      if (std::find(shard_names.begin(), shard_names.end(), s) == shard_names.end()) shard_names.push_back(s);
    }
    std::sort(shard_names.begin(), shard_names.end());
  } else {
    for (const auto& f : fs::directory_iterator(dir))
      if (f.path().extension() == ".safetensors") shard_names.push_back(f.path().filename().string());
    std::sort(shard_names.begin(), shard_names.end());
    if (shard_names.empty()) model_error(dir, ": no *.safetensors files and no model.safetensors.index.json");
  }

  for (const auto& shard : shard_names) {
    const std::string path = (fs::path(dir) / shard).string();
    if (!entry_exists(path)) model_error(index_path.string(), ": shard '", shard, "' does not exist");
    files_.push_back(std::make_unique<SafetensorsFile>(path));
    const SafetensorsFile* file = files_.back().get();
    for (const auto& e : file->entries()) {
      if (!index_map.empty()) {
        auto it = index_map.find(e.name);
        if (it == index_map.end())
          model_error(path, ": tensor '", e.name, "' is not listed in ", index_path.string());
        if (it->second != shard)
          model_error(index_path.string(), ": tensor '", e.name, "' is listed in shard '", it->second,
                      "' but found in '", shard, "'");
      }
      auto [it, inserted] = by_name_.emplace(e.name, Located{file, &e});
      if (!inserted)
        model_error(path, ": tensor '", e.name, "' is duplicated (also in ", it->second.file->path(), ")");
      names_.push_back(e.name);
    }
  }
  for (const auto& [tensor, shard] : index_map)
    if (!by_name_.count(tensor))
      model_error(index_path.string(), ": tensor '", tensor, "' is listed for shard '", shard, "' but the shard lacks it");
}

const TensorStore::Located* TensorStore::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &it->second;
}

void SafetensorsWriter::add(std::string name, DType dtype, Shape shape, std::span<const std::byte> data) {
  const auto nbytes = dtype_bytes(dtype, uint64_t(shape_numel(shape)));
  if (!nbytes || *nbytes != data.size())
    runtime_error("safetensors writer: tensor '", name, "' has ", data.size(), " bytes for shape ",
                  shape_str(shape), " of ", dtype_name(dtype));
  tensors_.push_back({std::move(name), dtype, std::move(shape), data, *nbytes});
}

void SafetensorsWriter::add_hole(std::string name, DType dtype, Shape shape) {
  const auto nbytes = dtype_bytes(dtype, uint64_t(shape_numel(shape)));
  if (!nbytes) runtime_error("safetensors writer: tensor '", name, "' does not fill whole bytes");
  tensors_.push_back({std::move(name), dtype, std::move(shape), {}, *nbytes});
}

uint64_t SafetensorsWriter::write(const std::string& path) const {
  json header = json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.nbytes}}};
    offset += t.nbytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned

  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) runtime_error(path, ": cannot create: ", std::strerror(errno));
  auto write_all = [&](const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n) {
      const ssize_t w = ::write(fd, c, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        const int err = errno;
        ::close(fd);
        runtime_error(path, ": write failed: ", std::strerror(err));
      }
      c += w;
      n -= size_t(w);
    }
  };
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = (uint64_t(text.size()) >> (8 * i)) & 0xFF;
  write_all(len, 8);
  write_all(text.data(), text.size());
  const uint64_t total = 8 + text.size() + offset;
  for (const auto& t : tensors_) {
    if (t.data.empty() && t.nbytes) {
      if (::lseek(fd, off_t(t.nbytes), SEEK_CUR) < 0) runtime_error(path, ": seek failed");
    } else {
      write_all(t.data.data(), t.data.size());
    }
  }
  if (::ftruncate(fd, off_t(total)) != 0) runtime_error(path, ": cannot set size: ", std::strerror(errno));
  if (::close(fd) != 0) runtime_error(path, ": close failed: ", std::strerror(errno));
  return total;
}

}  // namespace tetra
