// The tokenizer's parts on small hand-made tokenizer.json documents, so each behaviour is
// pinned down independently of the large DeepSeek vocabulary.
#include "text/tokenizer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "text/byte_level.h"
#include "text/detokenizer.h"

namespace tetra::text {
namespace {

using nlohmann::json;

// Byte tokens get ids 0..255 in byte order; `extra` tokens follow.
json byte_vocab(const std::vector<std::string>& extra) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[bytes_to_byte_level(std::string(1, char(b)))] = b;
  for (size_t i = 0; i < extra.size(); ++i) vocab[extra[i]] = 256 + i;
  return vocab;
}

json tokenizer_json(json merges, json pre_tokenizer, json added = json::array()) {
  return {{"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre_tokenizer},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", byte_vocab({"ab", "abc", "bc", "ĠĠ"})}, {"merges", merges}}}};
}

const json kNoPreTokenizer = nullptr;

std::vector<std::string> split(const json& pre_tokenizer, std::string_view text) {
  const PreTokenizer p(pre_tokenizer);
  PreTokenizerScratch scratch;
  std::vector<std::string_view> pieces;
  p.split(text, scratch, pieces);
  return {pieces.begin(), pieces.end()};
}

json split_on(const char* pattern, const char* behavior, bool invert = false) {
  return {{"type", "Split"}, {"pattern", {{"String", pattern}}}, {"behavior", behavior}, {"invert", invert}};
}

TEST(Tokenizer, MergesInStringAndPairFormAgreeAndFollowRank) {
  // "b c" outranks "a b", so "abc" becomes a + bc; "a bc" is never listed, so it stays two ids.
  const Tokenizer strings(tokenizer_json({"b c", "a b", "ab c"}, kNoPreTokenizer), nullptr);
  const Tokenizer pairs(tokenizer_json(json::array({json::array({"b", "c"}), json::array({"a", "b"}), json::array({"ab", "c"})}), kNoPreTokenizer), nullptr);
  EXPECT_EQ(strings.encode("abc", SpecialTokens::recognized), (std::vector<TokenId>{'a', 258}));
  EXPECT_EQ(pairs.encode("abc", SpecialTokens::recognized), (std::vector<TokenId>{'a', 258}));
  const Tokenizer ab_first(tokenizer_json({"a b", "ab c", "b c"}, kNoPreTokenizer), nullptr);
  EXPECT_EQ(ab_first.encode("abcab", SpecialTokens::recognized), (std::vector<TokenId>{257, 256}));
}

TEST(Tokenizer, BadMergeIsAModelError) {
  EXPECT_THROW(Tokenizer(tokenizer_json({"a x y"}, kNoPreTokenizer), nullptr), Error);
  EXPECT_THROW(Tokenizer(tokenizer_json({"q r"}, kNoPreTokenizer), nullptr), Error);  // "qr" not in vocab
}

TEST(PreTokenizer, SplitBehaviours) {
  using V = std::vector<std::string>;
  EXPECT_EQ(split(split_on("-", "Removed"), "the-final--countdown"), (V{"the", "final", "countdown"}));
  EXPECT_EQ(split(split_on("-", "Isolated"), "the-final--countdown"), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split(split_on("-", "MergedWithPrevious"), "the-final--countdown"), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split(split_on("-", "MergedWithNext"), "the-final--countdown"), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split(split_on("-", "Contiguous"), "the-final--countdown"), (V{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(split(split_on("-", "Removed", true), "the-final--countdown"), (V{"-", "-", "-"}));
}

TEST(PreTokenizer, UnicodeClassesLookaheadAndOnigurumaWhitespace) {
  using V = std::vector<std::string>;
  const json words = {{"type", "Split"}, {"pattern", {{"Regex", R"(\p{L}+|\s+(?!\S)|\s+)"}}}, {"behavior", "Isolated"}};
  EXPECT_EQ(split(words, "añb   c"), (V{"añb", "  ", " ", "c"}));
  // U+180E is not White_Space in Oniguruma (the library's engine), though PCRE2 counts it.
  EXPECT_EQ(split(words, "a\u180E b"), (V{"a", "\u180E", " ", "b"}));
  const json sequence = {{"type", "Sequence"},
                         {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", R"(\p{N}{1,3})"}}}, {"behavior", "Isolated"}},
                                            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  EXPECT_EQ(split(sequence, "x12345y"), (V{"x", "123", "45", "y"}));
}

TEST(PreTokenizer, ByteLevelPrefixSpaceAndGpt2Regex) {
  using V = std::vector<std::string>;
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  EXPECT_EQ(split(byte_level, "Hello world's 42!"), (V{" Hello", " world", "'s", " 42", "!"}));
}

TEST(PreTokenizer, UnsupportedTypeIsAModelError) {
  EXPECT_THROW(PreTokenizer(json{{"type", "Metaspace"}}), Error);
  EXPECT_THROW(PreTokenizer(json{{"type", "Split"}, {"pattern", {{"Regex", "("}}}, {"behavior", "Isolated"}}), Error);
}

TEST(Tokenizer, AddedTokensSpecialOrPlainAndStripping) {
  const json added = {
      {{"id", 300}, {"content", "<s>"}, {"special", true}, {"normalized", false}},
      {{"id", 301}, {"content", "<u>"}, {"special", false}, {"normalized", true}},
      {{"id", 302}, {"content", "<u>x"}, {"special", false}, {"normalized", true}, {"lstrip", true}, {"rstrip", true}},
  };
  const Tokenizer t(tokenizer_json(json::array(), kNoPreTokenizer, added), {{"bos_token", "<s>"}, {"eos_token", {{"content", "<u>"}}}});
  EXPECT_EQ(t.encode("a<s>b", SpecialTokens::recognized), (std::vector<TokenId>{'a', 300, 'b'}));
  EXPECT_EQ(t.encode("a<s>b", SpecialTokens::as_text), (std::vector<TokenId>{'a', '<', 's', '>', 'b'}));
  // Non-special added tokens are recognized either way; the longest match wins, and
  // lstrip/rstrip swallow the whitespace around it.
  EXPECT_EQ(t.encode("a<u>b", SpecialTokens::as_text), (std::vector<TokenId>{'a', 301, 'b'}));
  EXPECT_EQ(t.encode("a  <u>x  b", SpecialTokens::as_text), (std::vector<TokenId>{'a', 302, 'b'}));
  EXPECT_EQ(t.bos_id(), 300u);
  EXPECT_EQ(t.eos_id(), 301u);
  EXPECT_EQ(t.decode(std::vector<TokenId>{'a', 300, 302}), "a<s><u>x");
}

TEST(Tokenizer, InvalidInputAndIdsAreUsageErrors) {
  const Tokenizer t(tokenizer_json(json::array(), kNoPreTokenizer), nullptr);
  try {
    t.encode("ok\xC3(", SpecialTokens::recognized);
    FAIL() << "invalid UTF-8 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::usage);
    EXPECT_NE(std::string(e.what()).find("byte offset 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(t.decode(std::vector<TokenId>{5000}), Error);
}

// Added-token ids follow the vocabulary's rule, an integer in [0, 2^31): -1 was read as 2^32-1
// (the decode table, sized id + 1 in 32 bits, was then empty there: a write out of bounds) and
// 2^40 as 0.
TEST(Tokenizer, AddedTokenIdsOutOfRangeAreModelErrors) {
  for (const json& id : {json(-1), json(4294967295LL), json(int64_t(1) << 40), json("300"), json(300.5)}) {
    const json added = {{{"id", id}, {"content", "<s>"}, {"special", true}}};
    try {
      Tokenizer(tokenizer_json(json::array(), kNoPreTokenizer, added), nullptr);
      ADD_FAILURE() << "added token id " << id.dump() << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::model);
      EXPECT_NE(std::string(e.what()).find("has no valid id: " + id.dump()), std::string::npos) << e.what();
    }
  }
}

// A field of the wrong JSON type is a model error that names the file, not a JSON library
// exception (which the CLI reported with exit code 1 and no file).
TEST(Tokenizer, FieldsOfTheWrongTypeAreModelErrorsNamingTheFile) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("tetra_tok_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const json good = tokenizer_json(json::array(), kNoPreTokenizer, json::array({{{"id", 300}, {"content", "<s>"}}}));
  json model_type = good, dropout = good, special = good, normalizer = good, no_model = good;
  model_type["model"]["type"] = 5;
  dropout["model"]["dropout"] = "0.1";
  special["added_tokens"][0]["special"] = "yes";
  normalizer["normalizer"] = "NFC";
  no_model.erase("model");
  for (const json& doc : {model_type, dropout, special, normalizer, no_model, json::array()}) {
    std::ofstream(dir / "tokenizer.json") << doc.dump();
    try {
      Tokenizer::from_file(dir / "tokenizer.json");
      ADD_FAILURE() << doc.dump() << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::model);
      EXPECT_NE(std::string(e.what()).find((dir / "tokenizer.json").string()), std::string::npos) << e.what();
    }
  }
  std::ofstream(dir / "tokenizer.json") << good.dump();
  std::ofstream(dir / "tokenizer_config.json") << R"({"bos_token": {"content": 5}})";
  try {
    Tokenizer::from_file(dir / "tokenizer.json");
    ADD_FAILURE() << "bos_token content 5 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::model);
    EXPECT_NE(std::string(e.what()).find("tokenizer_config.json: bos_token content is not a string"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(dir);
}

// Ids index the decode table: an id of 2^31 - 1 sized it to 64 GB before any other check. Ids
// may leave gaps (300 after 260 tokens) but stay below twice the number of tokens.
TEST(Tokenizer, IdsFarBeyondTheTokenCountAreModelErrors) {
  json vocab_id = tokenizer_json(json::array(), kNoPreTokenizer), vocab_twice = vocab_id;
  vocab_id["model"]["vocab"]["zz"] = INT32_MAX;  // 261 tokens
  vocab_twice["model"]["vocab"]["zz"] = 5;
  const json added = {{{"id", 300}, {"content", "<s>"}}, {{"id", INT32_MAX}, {"content", "<t>"}}};  // 262 tokens
  const std::pair<json, std::string> cases[] = {
      {vocab_id, "tokenizer.json: token 'zz' has id 2147483647, not below 522 (twice the number of tokens)"},
      {tokenizer_json(json::array(), kNoPreTokenizer, added),
       "tokenizer.json: token '<t>' has id 2147483647, not below 524 (twice the number of tokens)"},
      {vocab_twice, "has id 5, as another entry does"},
  };
  for (const auto& [doc, expected] : cases) {
    try {
      Tokenizer(doc, nullptr);
      ADD_FAILURE() << expected << ": accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::model);
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
}

// A FIFO was opened for reading and waited for a writer forever, a directory read failed naming
// no file, and nesting deeper than an error message can dump overflowed the stack.
TEST(Tokenizer, UnreadableFilesAreModelErrorsNamingTheFile) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("tetra_tok_files_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "tokenizer.json");
  auto error_of_loading = [&] {
    try {
      Tokenizer::from_file(dir / "tokenizer.json");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::model);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(error_of_loading(), (dir / "tokenizer.json").string() + ": not a regular file");
  std::filesystem::remove(dir / "tokenizer.json");
  ASSERT_EQ(::mkfifo((dir / "tokenizer.json").c_str(), 0644), 0);
  EXPECT_EQ(error_of_loading(), (dir / "tokenizer.json").string() + ": not a regular file");
  std::filesystem::remove(dir / "tokenizer.json");
  std::ofstream(dir / "tokenizer.json") << tokenizer_json(json::array(), kNoPreTokenizer).dump();
  ASSERT_EQ(::mkfifo((dir / "tokenizer_config.json").c_str(), 0644), 0);
  EXPECT_EQ(error_of_loading(), (dir / "tokenizer_config.json").string() + ": not a regular file");
  std::filesystem::remove(dir / "tokenizer_config.json");
  // A link to nowhere is a file that cannot be read, not a tokenizer without its config.
  std::filesystem::create_symlink(dir / "nowhere.json", dir / "tokenizer_config.json");
  EXPECT_EQ(error_of_loading().rfind((dir / "tokenizer_config.json").string() + ": cannot open", 0), 0u);
  std::filesystem::remove(dir / "tokenizer_config.json");
  std::ofstream(dir / "tokenizer.json") << R"({"normalizer": {"type": "NFC", "x": )" << std::string(1000000, '[')
                                        << std::string(1000000, ']') << "}}";
  EXPECT_EQ(error_of_loading(), (dir / "tokenizer.json").string() + ": nests JSON deeper than 64 levels");
  std::filesystem::remove_all(dir);
}

TEST(Tokenizer, SingleWordAddedTokensAreRejected) {
  const json added = {{{"id", 300}, {"content", "w"}, {"single_word", true}}};
  EXPECT_THROW(Tokenizer(tokenizer_json(json::array(), kNoPreTokenizer, added), nullptr), Error);
}

TEST(IncrementalDetokenizer, HoldsSplitCharactersAndFlushesInvalidBytes) {
  const Tokenizer t(tokenizer_json(json::array(), kNoPreTokenizer), nullptr);
  IncrementalDetokenizer stream(t);
  EXPECT_EQ(stream.push(0xE4), "");  // 你 = E4 BD A0
  EXPECT_EQ(stream.push(0xBD), "");
  EXPECT_EQ(stream.push(0xA0), "你");
  EXPECT_EQ(stream.push(0xE4), "");
  EXPECT_EQ(stream.push('a'), "\uFFFDa");  // the lead byte can no longer complete
  EXPECT_EQ(stream.push(0xF0), "");
  EXPECT_EQ(stream.finish(), "\uFFFD");
  EXPECT_EQ(t.decode(std::vector<TokenId>{0xE4, 0xBD, 0xA0, 0xE4, 'a', 0xF0}), "你\uFFFDa\uFFFD");
}

}  // namespace
}  // namespace tetra::text
