// safetensors: round trips through the writer, every header check, sharded checkpoints with an
// index, and thousands of random header mutations that must end in a clean error or a valid file.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/error.h"
#include "io/safetensors.h"

namespace tetra {
namespace {
namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tetra_st_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A raw file from a header string and `data_bytes` zero bytes of data.
  std::string raw_file(const std::string& header, size_t data_bytes, const std::string& name = "raw.safetensors") {
    std::string bytes(8, '\0');
    const uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char((n >> (8 * i)) & 0xFF);
    bytes += header;
    bytes.append(data_bytes, '\0');
    std::ofstream(path(name), std::ios::binary) << bytes;
    return path(name);
  }

  std::string error_of(const std::string& file) {
    try {
      SafetensorsFile f(file);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::model);
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

TEST_F(SafetensorsTest, WriteReadRoundTrip) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<uint8_t> b = {0x12, 0x34, 0x56};
  SafetensorsWriter w;
  w.add("a", DType::f32, {2, 3}, std::as_bytes(std::span(a)));
  w.add("packed", DType::f4_e2m1, {2, 3}, std::as_bytes(std::span(b)));
  w.add_hole("hole", DType::bf16, {4});
  w.set_metadata("format", "pt");
  w.write(path("m.safetensors"));

  SafetensorsFile f(path("m.safetensors"));
  ASSERT_EQ(f.entries().size(), 3u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  const auto& ea = f.entries()[0];
  EXPECT_EQ(ea.name, "a");
  EXPECT_EQ(ea.shape, (Shape{2, 3}));
  const TensorView va = f.view(ea);
  EXPECT_EQ(std::memcmp(va.data, a.data(), 24), 0);
  const TensorView vp = f.view(f.entries()[1]);
  EXPECT_EQ(vp.dtype, DType::f4_e2m1);
  EXPECT_EQ(vp.nbytes, 3u);
  EXPECT_EQ(fp4_code_at(vp.as<uint8_t>(), 5), 0x5);
  EXPECT_EQ(f.view(f.entries()[2]).nbytes, 8u);
}

TEST_F(SafetensorsTest, HeaderChecksNameFileAndTensor) {
  struct Case {
    std::string header;
    size_t data;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4, "reach past the end"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}})", 12, "needs 8"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8, "end before they begin"},
      {R"({"w":{"dtype":"F99","shape":[2],"data_offsets":[0,8]}})", 8, "unknown dtype"},
      {R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8, "negative"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8, "data_offsets"},
      {R"({"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2, "whole bytes"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       12, "overlap"},
      {R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", 8, "overflows"},
      // no bytes, but the dimensions before the zero overflow int64 (shape_numel's running product)
      {R"({"w":{"dtype":"F32","shape":[4611686018427387904,2,0],"data_offsets":[0,0]}})", 0, "overflows"},
      {R"({"w":{"dtype":"F32","shape":[4294967296,2147483648,0],"data_offsets":[0,0]}})", 0, "overflows"},
      {R"({"w":[1,2]})", 0, "not an object"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", 8, "not valid JSON"},
      {R"([1,2,3])", 0, "not a JSON object"},
      // nlohmann keeps the last of repeated keys: the first 'w' vanished without a word
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8, "raw.safetensors: tensor 'w' appears twice in the header"},
      // error messages dump values, recursing once per level: this overflowed the stack
      {R"({"w":{"dtype":"F32","shape":)" + std::string(1000000, '[') + std::string(1000000, ']') + "}}", 0,
       "raw.safetensors: header: nests JSON deeper than 64 levels"},
  };
  for (const auto& c : cases) {
    const std::string msg = error_of(raw_file(c.header, c.data));
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.header << " -> " << msg;
    EXPECT_NE(msg.find("raw.safetensors"), std::string::npos) << msg;
  }
  // Header length longer than the file; file shorter than the length prefix; huge header.
  std::ofstream(path("short.safetensors"), std::ios::binary) << std::string("\x10\0\0\0\0\0\0\0{}", 10);
  EXPECT_NE(error_of(path("short.safetensors")).find("longer than the file"), std::string::npos);
  std::ofstream(path("tiny.safetensors"), std::ios::binary) << "abc";
  EXPECT_NE(error_of(path("tiny.safetensors")).find("too short"), std::string::npos);
  std::ofstream(path("huge.safetensors"), std::ios::binary) << std::string("\0\0\0\0\0\0\0\x7f{}", 10);
  EXPECT_NE(error_of(path("huge.safetensors")).find("limit"), std::string::npos);
}

TEST_F(SafetensorsTest, TruncatedFileIsReportedWithTheTensor) {
  std::vector<float> a(16, 1.0f);
  SafetensorsWriter w;
  w.add("layers.0.attn.wq_a.weight", DType::f32, {4, 4}, std::as_bytes(std::span(a)));
  w.write(path("t.safetensors"));
  fs::resize_file(path("t.safetensors"), fs::file_size(path("t.safetensors")) - 5);
  const std::string msg = error_of(path("t.safetensors"));
  EXPECT_NE(msg.find("layers.0.attn.wq_a.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("t.safetensors"), std::string::npos) << msg;
}

TEST_F(SafetensorsTest, ShardedStoreAndBrokenIndexes) {
  std::vector<float> a(4, 1.0f), b(4, 2.0f), c(2, 3.0f);
  SafetensorsWriter w1, w2;
  w1.add("a", DType::f32, {4}, std::as_bytes(std::span(a)));
  w2.add("b", DType::f32, {4}, std::as_bytes(std::span(b)));
  w2.add("c", DType::f32, {2}, std::as_bytes(std::span(c)));
  w1.write(path("s1.safetensors"));
  w2.write(path("s2.safetensors"));
  auto write_index = [&](const std::string& text) { std::ofstream(path("model.safetensors.index.json")) << text; };

  write_index(R"({"metadata":{},"weight_map":{"a":"s1.safetensors","b":"s2.safetensors","c":"s2.safetensors"}})");
  {
    TensorStore store(dir_.string());
    ASSERT_EQ(store.names().size(), 3u);
    const auto* loc = store.find("b");
    ASSERT_TRUE(loc);
    EXPECT_EQ(store.view(*loc).as<float>()[3], 2.0f);
    EXPECT_FALSE(store.find("d"));
  }
  auto error_for = [&](const std::string& index) {
    write_index(index);
    try {
      TensorStore store(dir_.string());
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::model);
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_for(R"({"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})").find("'c' is not listed"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors"}})")
                .find("found in 's2"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"weight_map":{"a":"s1.safetensors","b":"s2.safetensors","c":"s2.safetensors","d":"s1.safetensors"}})")
                .find("shard lacks it"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"weight_map":{"a":"s1.safetensors","b":"missing.safetensors"}})").find("does not exist"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"weight_map":{"a":"../s1.safetensors"}})").find("invalid shard"), std::string::npos);
  EXPECT_NE(error_for(R"({"weight_map":[1]})").find("weight_map"), std::string::npos);
  EXPECT_NE(error_for("{not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_for(R"({"weight_map":{"a":"s1.safetensors","b":"s2.safetensors","c":"s2.safetensors","b":"s1.safetensors"}})")
                .find("model.safetensors.index.json: weight_map lists tensor 'b' twice"),
            std::string::npos);

  fs::remove(path("model.safetensors.index.json"));
  w2.write(path("s3.safetensors"));  // "b" twice, no index
  try {
    TensorStore store(dir_.string());
    FAIL() << "duplicate accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("duplicated"), std::string::npos) << e.what();
  }
}

// Opening a FIFO for reading waited for a writer forever; a directory is refused the same way.
TEST_F(SafetensorsTest, FilesThatAreNotRegularAreRefused) {
  ASSERT_EQ(::mkfifo(path("fifo.safetensors").c_str(), 0644), 0);
  EXPECT_NE(error_of(path("fifo.safetensors")).find("fifo.safetensors: not a regular file"), std::string::npos);
  fs::create_directory(path("dir.safetensors"));
  EXPECT_NE(error_of(path("dir.safetensors")).find("dir.safetensors: not a regular file"), std::string::npos);
}

// Random mutations of a valid file's header: each must load cleanly or fail with a model error;
// when it loads, every view must lie inside the file (ASan checks the reads in CI).
TEST_F(SafetensorsTest, RandomHeaderMutationsNeverCrash) {
  std::vector<uint16_t> a(24, 0x3F80);
  std::vector<uint8_t> b(10, 0x11);
  std::vector<int64_t> c(3, 7);
  SafetensorsWriter w;
  w.add("layers.0.attn.wq_a.weight", DType::bf16, {4, 6}, std::as_bytes(std::span(a)));
  w.add("layers.0.ffn.experts.0.w1.weight", DType::f4_e2m1, {4, 5}, std::as_bytes(std::span(b)));
  w.add("layers.0.ffn.gate.tid2eid", DType::i64, {3}, std::as_bytes(std::span(c)));
  w.set_metadata("format", "pt");
  w.write(path("base.safetensors"));
  std::ifstream in(path("base.safetensors"), std::ios::binary);
  const std::string base((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | uint8_t(base[size_t(i)]);

  std::mt19937 rng(12345);
  const std::string alphabet = "0123456789[]{}\",:-.eE FBIU_x\\";
  int loaded = 0, rejected = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::string m = base;
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = 8 + rng() % header_len;
      switch (rng() % 5) {
        case 0: m[pos] = alphabet[rng() % alphabet.size()]; break;
        case 1: m[pos] = char(rng()); break;
        case 2: if (std::isdigit(uint8_t(m[pos]))) m[pos] = char('0' + rng() % 10); break;
        case 3: m[size_t(rng() % 8)] = char(rng()); break;  // length prefix
        case 4: m.resize(m.size() - rng() % 16); break;      // truncation
      }
    }
    std::ofstream(path("mut.safetensors"), std::ios::binary | std::ios::trunc) << m;
    try {
      SafetensorsFile f(path("mut.safetensors"));
      for (const auto& entry : f.entries()) {
        const TensorView v = f.view(entry);
        volatile uint8_t sink = 0;
        for (uint64_t k = 0; k < v.nbytes; ++k) sink = sink ^ uint8_t(v.data[k]);
      }
      ++loaded;
    } catch (const Error& e) {
      ASSERT_EQ(e.code(), ExitCode::model);
      ASSERT_NE(std::string(e.what()).find("mut.safetensors"), std::string::npos) << e.what();
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(loaded, 10);
}

}  // namespace
}  // namespace tetra
