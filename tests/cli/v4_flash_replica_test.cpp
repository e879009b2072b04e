// A header-only replica of the published DeepSeek-V4-Flash checkpoint (46 shards, every tensor of
// ../shared/reference/v4_flash_inventory.md with its name, shape and dtype, data left as sparse
// holes): `tetra info` must report every role and format and the published totals, reading
// headers only, in a few seconds.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "model/config.h"
#include "support/tiny_checkpoint.h"

namespace tetra {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

TEST(V4FlashReplica, InfoReportsPublishedTotalsFromHeadersOnly) {
  const fs::path dir = fs::temp_directory_path() / ("tetra_flash_replica_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  testing::TinyCheckpointOptions o;
  o.family = NameFamily::official;
  o.quant = testing::TinyQuant::fp8_mxfp4;
  o.shards = 46;
  o.with_mtp = true;
  o.header_only = true;
  o.config = load_model_config(TETRA_SOURCE_DIR "/tests/data/v4_flash");  // the published config.json
  testing::write_tiny_checkpoint(dir.string(), o);

  // CPU time of the child, not wall time: the assertion must not depend on the machine's load.
  rusage before{}, after{};
  ::getrusage(RUSAGE_CHILDREN, &before);
  const auto r = testing::run_command(std::string(TETRA_BINARY) + " info --json --model " + dir.string());
  ::getrusage(RUSAGE_CHILDREN, &after);
  auto seconds_of = [](const rusage& u) {
    return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  };
  const double seconds = seconds_of(after) - seconds_of(before);
  ASSERT_EQ(r.exit_code, 0) << r.output.substr(0, 4000);
  const json j = json::parse(r.output);
  EXPECT_EQ(j["files"], 46);
  EXPECT_EQ(j["tensors"], 69187);
  EXPECT_EQ(j["elements"], 158069433298ull);
  const double gib = double(1ull << 30);
  EXPECT_NEAR(j["tensor_bytes"].get<double>() / gib, 148.65, 0.005);   // published: 148.65 GiB of tensor data
  EXPECT_NEAR(j["file_bytes"].get<double>() / gib, 148.66, 0.011);     // published: 148.66 GiB of files
  EXPECT_EQ(j["weight_bytes"], j["tensor_bytes"]);
  EXPECT_TRUE(j["mtp"].get<bool>());
  EXPECT_EQ(j["formats"]["mxfp4"]["layers"], 44 * 256 * 3);             // 43 layers + MTP, 3 matrices per expert
  EXPECT_EQ(j["formats"]["fp8-block"]["layers"], 44 * 8 + 21 + 2);      // attention 5 + shared 3; indexer wq_b; e/h_proj
  EXPECT_GT(j["formats"]["dense"]["layers"], 0);
  EXPECT_EQ(j["kv"]["csa"]["layers"], 21);
  EXPECT_EQ(j["kv"]["hca"]["layers"], 20);
  EXPECT_EQ(j["kv"]["sliding"]["layers"], 2);
  // fp8 KV entry 584 bytes, fp4 indexer key 68 bytes: CSA (584+68)/4, HCA 584/128 per token.
  EXPECT_DOUBLE_EQ(j["kv"]["csa"]["bytes_per_token"].get<double>(), (584.0 + 68.0) / 4);
  EXPECT_DOUBLE_EQ(j["kv"]["hca"]["bytes_per_token"].get<double>(), 584.0 / 128);
  EXPECT_EQ(j["kv"]["sliding"]["bytes_per_sequence"], 128 * 584);
  // A guard against work that grows faster than the tensor count (1.3 s in a release build);
  // an unoptimized build parses about four times slower.
#ifdef NDEBUG
  constexpr double kLimit = 5.0;
#else
  constexpr double kLimit = 20.0;
#endif
  EXPECT_LT(seconds, kLimit) << "tetra info took " << seconds << " s of CPU";

  const auto human = testing::run_command(std::string(TETRA_BINARY) + " info --model " + dir.string());
  ASSERT_EQ(human.exit_code, 0);
  EXPECT_NE(human.output.find("69187"), std::string::npos);
  EXPECT_NE(human.output.find("148.65 GiB"), std::string::npos);
  EXPECT_NE(human.output.find("mtp.0.ffn.experts.255.w2"), std::string::npos);
  EXPECT_NE(human.output.find("layers.42.attn.indexer.compressor.ape"), std::string::npos);
  std::printf("tetra info on the 46-shard V4-Flash replica: %.2f s of CPU\n", seconds);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tetra
