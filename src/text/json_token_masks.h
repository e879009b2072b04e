#pragma once
// Which tokens of a vocabulary may come next after a JSON-object prefix: those whose bytes all
// continue it. Tokens are visited in byte order, so the ones sharing a prefix share its run and
// a prefix that fails rules out all of them at once. The latest masks are kept by prefix state
// (LRU): most steps inside a string, or between values, meet a state already seen. One instance
// serves every JSON-mode sequence of a server, from any thread.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "text/json_object_prefix.h"
#include "text/tokenizer.h"

namespace tetra::text {

class JsonTokenMasks {
 public:
  using Mask = std::vector<bool>;  // by token id: may come next

  // token_bytes[id]: what token `id` decodes to, empty for one that may never come (unused ids,
  // control tokens); end tokens may come once the object is complete, and only then.
  JsonTokenMasks(std::vector<std::string> token_bytes, std::vector<int32_t> end_token_ids, size_t cached_masks = 64);
  // The vocabulary of `tokenizer` without its added tokens: they are the chat format's markers
  // (e.g. "｜DSML｜"), which the completion parser would read as such inside a JSON string.
  static std::shared_ptr<JsonTokenMasks> of_tokenizer(const Tokenizer& tokenizer, std::vector<int32_t> end_token_ids);

  std::shared_ptr<const Mask> allowed(const JsonObjectPrefix& prefix);
  const std::string& token_bytes(int32_t id) const { return token_bytes_.at(size_t(id)); }
  bool is_end_token(int32_t id) const;
  size_t vocab_size() const { return token_bytes_.size(); }

 private:
  Mask compute(const JsonObjectPrefix& prefix) const;

  std::vector<std::string> token_bytes_;
  std::vector<int32_t> end_token_ids_;
  std::vector<int32_t> sorted_ids_;      // the tokens with bytes, in byte order
  std::vector<size_t> shared_prefix_;    // bytes sorted_ids_[i] shares with sorted_ids_[i - 1]
  size_t longest_token_ = 0;

  struct CachedMask {
    JsonObjectPrefix prefix;
    std::shared_ptr<const Mask> mask;
    uint64_t last_used;
  };
  std::mutex mutex_;
  std::vector<CachedMask> cache_;  // guarded by mutex_
  size_t cache_capacity_;
  uint64_t clock_ = 0;  // guarded by mutex_
};

}  // namespace tetra::text
