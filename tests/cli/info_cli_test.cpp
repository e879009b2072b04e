// `tetra info` on every family and format, and on corrupt input: each problem exits with code 3
// and a message naming the file and the tensor or field.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "support/tiny_checkpoint.h"

namespace tetra {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::run_command;
using testing::TinyCheckpointOptions;
using testing::TinyQuant;

std::string info(const fs::path& dir, const std::string& extra = "") {
  return std::string(TETRA_BINARY) + " info --model " + dir.string() + " " + extra;
}

class InfoCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tetra_info_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Rewrites model.safetensors with its header edited by `edit`; `extra_data` bytes of zeros are
  // appended to the data section.
  void edit_header(const std::function<void(json&, uint64_t data_size)>& edit, size_t extra_data = 0) {
    const fs::path file = dir_ / "model.safetensors";
    std::ifstream in(file, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
    json header = json::parse(bytes.substr(8, n));
    std::string data = bytes.substr(8 + n);
    edit(header, data.size());
    data.append(extra_data, '\0');
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[size_t(i)] = char((uint64_t(text.size()) >> (8 * i)) & 0xFF);
    std::ofstream(file, std::ios::binary | std::ios::trunc) << out << text << data;
  }

  void expect_model_error(const std::vector<std::string>& needles) {
    const auto r = run_command(info(dir_));
    EXPECT_EQ(r.exit_code, 3) << r.output;
    for (const auto& n : needles) EXPECT_NE(r.output.find(n), std::string::npos) << "missing '" << n << "' in:\n" << r.output;
  }

  fs::path dir_;
};

TEST_F(InfoCliTest, AllFamiliesAndFormats) {
  struct Case {
    NameFamily family;
    TinyQuant quant;
    std::vector<std::string> formats;
  };
  const std::vector<Case> cases = {
      {NameFamily::official, TinyQuant::fp8_mxfp4, {"fp8-block", "mxfp4", "dense"}},
      {NameFamily::hf_save, TinyQuant::bf16, {"dense"}},
      {NameFamily::hf_module, TinyQuant::nvfp4, {"nvfp4", "fp8-tensor", "dense"}},
  };
  for (const auto& c : cases) {
    fs::remove_all(dir_);
    TinyCheckpointOptions o;
    o.family = c.family;
    o.quant = c.quant;
    o.shards = 2;
    o.with_mtp = true;
    testing::write_tiny_checkpoint(dir_.string(), o);
    const auto r = run_command(info(dir_));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const auto& f : c.formats) EXPECT_NE(r.output.find(f), std::string::npos) << f << "\n" << r.output;
    EXPECT_NE(r.output.find("layers.2.attn.compressor.ape"), std::string::npos);
    EXPECT_NE(r.output.find("MTP present"), std::string::npos);
    const auto j = run_command(info(dir_, "--json"));
    ASSERT_EQ(j.exit_code, 0) << j.output;
    const json parsed = json::parse(j.output);
    EXPECT_EQ(parsed["files"], 2);
    EXPECT_TRUE(parsed["mtp"].get<bool>());
    // the tiny model's 4 experts: 2 ranks hold 2 each, 4 ranks 1 each (no 8)
    const uint64_t total = parsed["weight_bytes"], experts = parsed["routed_expert_bytes"];
    EXPECT_GT(experts, 0u);
    EXPECT_EQ(parsed["weight_bytes_per_rank"]["2"].get<uint64_t>(), total - experts / 2);
    EXPECT_EQ(parsed["weight_bytes_per_rank"]["4"].get<uint64_t>(), total - experts / 4 * 3);
    EXPECT_FALSE(parsed["weight_bytes_per_rank"].contains("8"));
  }
}

TEST_F(InfoCliTest, TransformersCheckpoint) {
  const auto r = run_command(info(TETRA_SOURCE_DIR "/tests/data/hf_save_pretrained"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("model.layers.1.attn.norm.weight"), std::string::npos);
  EXPECT_NE(r.output.find("layers.1.attn.kv_norm.weight"), std::string::npos);
}

TEST_F(InfoCliTest, CorruptCheckpointsNameFileAndTensor) {
  auto fresh = [&] {
    fs::remove_all(dir_);
    testing::write_tiny_checkpoint(dir_.string(), TinyCheckpointOptions{});
  };
  const std::string file = "model.safetensors";

  fresh();  // truncated file
  fs::resize_file(dir_ / file, fs::file_size(dir_ / file) - 100);
  expect_model_error({file, "head.weight", "past the end"});

  fresh();  // offsets out of range
  edit_header([](json& h, uint64_t size) { h["layers.1.attn.wkv.weight"]["data_offsets"] = {size - 8192, size + 8}; });
  expect_model_error({file, "layers.1.attn.wkv.weight", "past the end"});

  fresh();  // overlapping tensors
  edit_header([](json& h, uint64_t) { h["layers.1.attn.attn_sink"]["data_offsets"] = h["layers.1.attn.q_norm.weight"]["data_offsets"]; h["layers.1.attn.attn_sink"]["shape"] = {32}; h["layers.1.attn.attn_sink"]["dtype"] = "BF16"; });
  expect_model_error({file, "overlap", "layers.1.attn"});

  fresh();  // header longer than the file
  {
    std::fstream f(dir_ / file, std::ios::binary | std::ios::in | std::ios::out);
    const uint64_t n = fs::file_size(dir_ / file) + 10;
    char len[8];
    for (int i = 0; i < 8; ++i) len[i] = char((n >> (8 * i)) & 0xFF);
    f.write(len, 8);
  }
  expect_model_error({file, "longer than the file"});

  fresh();  // wrong dtype for a role (same byte size)
  edit_header([](json& h, uint64_t) { h["layers.1.attn.attn_sink"]["dtype"] = "I32"; });
  expect_model_error({file, "'layers.1.attn.attn_sink'", "expected F32/BF16/F16 [4]"});

  fresh();  // wrong shape for a role
  edit_header([](json& h, uint64_t) { h["layers.1.attn.wq_a.weight"]["shape"] = {64, 32}; });
  expect_model_error({file, "layers.1.attn.wq_a.weight", "expected shape [32, 64]"});

  fresh();  // missing tensor
  edit_header([](json& h, uint64_t) { h.erase("layers.2.attn.compressor.ape"); });
  expect_model_error({"missing tensor layers.2.attn.compressor.ape"});

  fresh();  // unknown tensor
  edit_header([](json& h, uint64_t size) {
    h["layers.1.attn.mystery.weight"] = {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {size, size + 8}}};
  }, 8);
  expect_model_error({file, "unknown tensor 'layers.1.attn.mystery.weight'"});

  fresh();  // the same role spelled twice
  edit_header([](json& h, uint64_t size) {
    h["model.layers.1.self_attn.sinks"] = {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {size, size + 16}}};
  }, 16);
  expect_model_error({file, "duplicated", "'model.layers.1.self_attn.sinks'", "layers.1.attn.attn_sink"});

  fresh();  // bad config field
  {
    json c = json::parse(std::ifstream(dir_ / "config.json"));
    c["o_groups"] = "two";
    std::ofstream(dir_ / "config.json") << c.dump();
  }
  expect_model_error({"config.json", "'o_groups' must be an integer"});
}

TEST_F(InfoCliTest, BrokenIndexIsNamed) {
  TinyCheckpointOptions o;
  o.shards = 2;
  testing::write_tiny_checkpoint(dir_.string(), o);
  const fs::path index = dir_ / "model.safetensors.index.json";
  json j = json::parse(std::ifstream(index));
  j["weight_map"].erase("layers.3.attn.wkv.weight");
  std::ofstream(index) << j.dump();
  expect_model_error({"model.safetensors.index.json", "layers.3.attn.wkv.weight", "not listed"});
  std::ofstream(index) << "{\"weight_map\": ";
  expect_model_error({"model.safetensors.index.json", "not valid JSON"});
}

// A FIFO among a checkpoint's files was opened for reading and waited for a writer forever; a
// directory read as empty ("not valid JSON") or failed naming no file (exit code 1).
// Likewise links that lead nowhere.
TEST_F(InfoCliTest, FilesThatAreNotRegularOrMissingBehindLinksAreRefused) {
  TinyCheckpointOptions o;
  o.shards = 2;
  for (const std::string name : {"config.json", "hf_quant_config.json", "model.safetensors.index.json",
                                 "model-00002-of-00002.safetensors"}) {
    fs::remove_all(dir_);
    testing::write_tiny_checkpoint(dir_.string(), o);
    fs::remove(dir_ / name);
    ASSERT_EQ(::mkfifo((dir_ / name).c_str(), 0644), 0);
    expect_model_error({name + ": not a regular file"});
    fs::remove(dir_ / name);
    fs::create_directory(dir_ / name);
    expect_model_error({name + ": not a regular file"});
    // A link to nowhere was taken as no file (hf_quant_config.json, the index: skipped
    // silently), and a link in a loop failed with exit code 1.
    fs::remove(dir_ / name);
    fs::create_symlink(dir_ / "nowhere", dir_ / name);
    expect_model_error({name + ": cannot open"});
    fs::remove(dir_ / name);
    fs::create_symlink(dir_ / name, dir_ / name);
    expect_model_error({name + ": cannot open"});
  }
}

TEST_F(InfoCliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(run_command(std::string(TETRA_BINARY) + " info").exit_code, 2);
  EXPECT_EQ(run_command(std::string(TETRA_BINARY) + " info --model x --bogus").exit_code, 2);
  EXPECT_EQ(run_command(std::string(TETRA_BINARY) + " frobnicate").exit_code, 2);
  const auto r = run_command(std::string(TETRA_BINARY) + " info --model /nonexistent/dir");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.output.find("/nonexistent/dir"), std::string::npos);
}

}  // namespace
}  // namespace tetra
