// tetra perplexity on a small text file (tokenizer, BOS, windows) and the command's errors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"

namespace tetra {
namespace {
namespace fs = std::filesystem;
using testing::run_command;

const fs::path kDemo = fs::path(TETRA_SOURCE_DIR) / "models" / "demo";

// `tetra perplexity ARGS --json`, stderr (the running perplexity) dropped; fails the test on a
// non-zero exit.
nlohmann::json perplexity_json(const std::string& args) {
  const auto r = run_command("(" + std::string(TETRA_BINARY) + " perplexity " + args + " --json 2>/dev/null)");
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
  return nlohmann::json::parse(r.output, nullptr, false);
}

class PerplexityCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tetra_ppl_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& content) {
    std::ofstream(dir_ / name) << content;
    return dir_ / name;
  }
  testing::CommandResult perplexity(const std::string& args) {
    return run_command(std::string(TETRA_BINARY) + " perplexity " + args);
  }
  void expect_failure(const std::string& args, int code, const std::string& message) {
    const auto r = perplexity(args);
    EXPECT_EQ(r.exit_code, code) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
  }

  fs::path dir_;
  const std::string model_ = "--model " + (kDemo / "bf16").string();
};

TEST_F(PerplexityCli, TextFileIsTokenizedWithBosAndWindowed) {
  const std::string code = "def add(a, b):\n    return a + b\n\n\nclass Point:\n    def __init__(self, x, y):\n"
                           "        self.x = x\n        self.y = y\n\n    def norm(self):\n"
                           "        return (self.x ** 2 + self.y ** 2) ** 0.5\n";
  const fs::path text = write("code.py", code);
  const auto ids = run_command(std::string(TETRA_BINARY) + " tokenize --tokenizer " + (kDemo / "bf16" / "tokenizer.json").string() +
                               " --file " + text.string());
  ASSERT_EQ(ids.exit_code, 0) << ids.output;
  const size_t tokens = nlohmann::json::parse(ids.output).size() + 1;  // + BOS
  ASSERT_GT(tokens, 32u);
  const auto j = perplexity_json(model_ + " --file " + text.string() + " --context 32");
  ASSERT_FALSE(j.is_discarded());
  // windows of 32 tokens, each scoring all but its first; a 1-token tail scores nothing
  const size_t full = tokens / 32, tail = tokens % 32;
  EXPECT_EQ(j["tokens"], tokens);
  EXPECT_EQ(j["windows"].size(), full + (tail >= 2 ? 1 : 0));
  EXPECT_EQ(j["tokens_scored"], full * 31 + (tail >= 2 ? tail - 1 : 0));
  // Code the model has seen the like of: far better than chance (8192 tokens).
  EXPECT_LT(j["perplexity"].get<double>(), 200);
  EXPECT_GT(j["perplexity"].get<double>(), 1);
  // The human-readable line.
  const auto r = perplexity(model_ + " --file " + text.string() + " --context 32");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("perplexity "), std::string::npos) << r.output;
}

// Ranks that split the experts score every token as one backend does, bit for bit (the JSON's
// per-token log-probabilities compared as printed).
TEST_F(PerplexityCli, ExpertParallelRanksScoreLikeOneBackend) {
  const fs::path text = write("text.txt", "The quick brown fox jumps over the lazy dog. def f(x):\n    return x * 2\n");
  const std::string args = "--model " + (kDemo / "nvfp4").string() + " --file " + text.string() + " --context 16 --per-token";
  const auto one = perplexity_json(args);
  ASSERT_FALSE(one.is_discarded());
  for (const char* ranks : {"2", "3"}) {
    const auto split = perplexity_json(args + " --expert-parallel " + ranks);
    ASSERT_FALSE(split.is_discarded());
    EXPECT_EQ(split, one) << ranks << " ranks";
  }
  expect_failure(args + " --expert-parallel 0", 2, "--expert-parallel");
}

TEST_F(PerplexityCli, BadInputsFailWithTheRightCode) {
  const auto ids = write("ids.json", "[0, 5, 9, 17]").string();
  // Where a GPU is usable this runs; elsewhere it says why it cannot.
  const auto cuda = perplexity(model_ + " --tokens-file " + ids + " --device cuda");
  if (cuda.exit_code != 0) {
    EXPECT_EQ(cuda.exit_code, 1) << cuda.output;
    EXPECT_NE(cuda.output.find("--device cuda:"), std::string::npos) << cuda.output;
  }
  expect_failure(model_ + " --file " + (dir_ / "absent.txt").string(), 2, "absent.txt");
  expect_failure(model_ + " --file " + write("empty.txt", "").string(), 2, "is empty");
  expect_failure(model_ + " --file " + ids + " --tokens-file " + ids, 2, "exactly one of");
  expect_failure(model_, 2, "exactly one of");
  expect_failure(model_ + " --tokens-file " + write("one.json", "[0]").string(), 2, "at least 2 tokens");
  expect_failure(model_ + " --tokens-file " + write("big.json", "[0, 8192]").string(), 2, "position 1: token id 8192");
  expect_failure(model_ + " --tokens-file " + write("bad.json", "[0, \"x\"]").string(), 2, "position 1 is not a token id");
  expect_failure(model_ + " --tokens-file " + ids + " --context 1", 2, "--context must be at least 2");
  expect_failure(model_ + " --tokens-file " + ids + " --context 100000", 2, "max_position_embeddings");
  expect_failure(model_ + " --tokens-file " + ids + " --chunks 0", 2, "--chunks");
  expect_failure(model_ + " --tokens-file " + ids + " --kv-cache-dtype f16", 2, "f16");
  // A checkpoint without tokenizer.json can only take ids.
  const std::string golden = (fs::path(TETRA_SOURCE_DIR) / "tests" / "data" / "golden" / "dense").string();
  expect_failure("--model " + golden + " --file " + write("t.txt", "x = 1\n").string(), 3, "no tokenizer.json");
  expect_failure("--model " + dir_.string() + " --tokens-file " + ids, 3, "config.json");
}

}  // namespace
}  // namespace tetra
