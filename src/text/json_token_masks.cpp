#include "text/json_token_masks.h"

#include <algorithm>
#include <cstdint>

namespace tetra::text {

JsonTokenMasks::JsonTokenMasks(std::vector<std::string> token_bytes, std::vector<int32_t> end_token_ids, size_t cached_masks)
    : token_bytes_(std::move(token_bytes)), end_token_ids_(std::move(end_token_ids)), cache_capacity_(std::max<size_t>(cached_masks, 1)) {
  for (size_t id = 0; id < token_bytes_.size(); ++id)
    if (!token_bytes_[id].empty() && !is_end_token(int32_t(id))) sorted_ids_.push_back(int32_t(id));
  std::sort(sorted_ids_.begin(), sorted_ids_.end(),
            [&](int32_t a, int32_t b) { return token_bytes_[size_t(a)] < token_bytes_[size_t(b)]; });
  shared_prefix_.resize(sorted_ids_.size());
  for (size_t i = 0; i < sorted_ids_.size(); ++i) {
    const std::string& bytes = token_bytes_[size_t(sorted_ids_[i])];
    longest_token_ = std::max(longest_token_, bytes.size());
    if (i == 0) continue;
    const std::string& before = token_bytes_[size_t(sorted_ids_[i - 1])];
    shared_prefix_[i] = size_t(std::mismatch(bytes.begin(), bytes.end(), before.begin(), before.end()).first - bytes.begin());
  }
}

std::shared_ptr<JsonTokenMasks> JsonTokenMasks::of_tokenizer(const Tokenizer& tokenizer, std::vector<int32_t> end_token_ids) {
  std::vector<std::string> bytes(tokenizer.vocab_size());
  for (size_t id = 0; id < bytes.size(); ++id)
    if (tokenizer.has_token(TokenId(id))) bytes[id] = tokenizer.token_bytes(TokenId(id));
  for (const AddedToken& t : tokenizer.added_tokens()) bytes[t.id].clear();
  return std::make_shared<JsonTokenMasks>(std::move(bytes), std::move(end_token_ids));
}

bool JsonTokenMasks::is_end_token(int32_t id) const {
  return std::find(end_token_ids_.begin(), end_token_ids_.end(), id) != end_token_ids_.end();
}

std::shared_ptr<const JsonTokenMasks::Mask> JsonTokenMasks::allowed(const JsonObjectPrefix& prefix) {
  std::lock_guard lock(mutex_);
  ++clock_;
  for (CachedMask& c : cache_)
    if (c.prefix == prefix) {
      c.last_used = clock_;
      return c.mask;
    }
  auto mask = std::make_shared<const Mask>(compute(prefix));
  if (cache_.size() < cache_capacity_) {
    cache_.push_back({prefix, mask, clock_});
  } else {
    auto oldest = std::min_element(cache_.begin(), cache_.end(),
                                   [](const CachedMask& a, const CachedMask& b) { return a.last_used < b.last_used; });
    *oldest = {prefix, mask, clock_};
  }
  return mask;
}

JsonTokenMasks::Mask JsonTokenMasks::compute(const JsonObjectPrefix& prefix) const {
  Mask allowed(token_bytes_.size(), false);
  // after[j]: the prefix followed by the first j bytes of the token being run
  std::vector<JsonObjectPrefix> after(longest_token_ + 1);
  after[0] = prefix;
  size_t failed = SIZE_MAX;  // bytes of the previous token that no longer continue
  for (size_t i = 0; i < sorted_ids_.size(); ++i) {
    const std::string& bytes = token_bytes_[size_t(sorted_ids_[i])];
    if (failed <= shared_prefix_[i]) continue;  // starts with the bytes that failed
    failed = SIZE_MAX;
    for (size_t j = shared_prefix_[i]; j < bytes.size(); ++j) {
      after[j + 1] = after[j];
      if (!after[j + 1].feed(static_cast<unsigned char>(bytes[j]))) {
        failed = j + 1;
        break;
      }
    }
    if (failed == SIZE_MAX) allowed[size_t(sorted_ids_[i])] = true;
  }
  if (prefix.complete())
    for (const int32_t id : end_token_ids_)
      if (size_t(id) < allowed.size()) allowed[size_t(id)] = true;
  return allowed;
}

}  // namespace tetra::text
