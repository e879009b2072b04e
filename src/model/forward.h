#pragma once
// The DeepSeek-V4 forward (SPEC.md), written once against the Backend interface: one batched
// step takes any number of new tokens per sequence (prefill chunks and single decode tokens
// alike) and continues each sequence from its SequenceState.
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"
#include "model/kv_layout.h"
#include "model/weights.h"
#include "runtime/sequence_state.h"

namespace tetra {

struct CacheTypes {
  KvCacheDtype kv = KvCacheDtype::fp8;
  IndexerCacheDtype indexer = IndexerCacheDtype::fp4;
};

class Model {
 public:
  // Loads every weight into the backend (the CPU backend dequantizes exactly).
  Model(const ModelConfig& config, const ModelWeights& weights, Backend& backend, CacheTypes caches);
  ~Model();

  SequenceState new_sequence() const;

  struct StepOutput {
    Tensor logits;  // [total new tokens, vocab], sequences in order
    Tensor hidden;  // [total new tokens, hc·dim]: the last layer's streams (the MTP input)
  };
  // tokens[i] (non-empty) continue sequences[i]; token ids are checked against the vocab.
  StepOutput step(const std::vector<SequenceState*>& sequences, const std::vector<std::vector<int32_t>>& tokens);

  // MTP block k, right after step(): `hidden` is that step's output and next[i] the tokens that
  // follow each of its tokens; gives the logits of the token after those, continuing the
  // block's own attention state in `sequences`.
  Tensor mtp_logits(int64_t k, const std::vector<SequenceState*>& sequences, const Tensor& hidden,
                    const std::vector<std::vector<int32_t>>& next);

  const ModelConfig& config() const { return config_; }

 private:
  struct Block;
  struct Batch;
  Tensor block_forward(const Block& b, int64_t layer, Tensor h, const Batch& batch,
                       const std::vector<SequenceState*>& sequences);
  Tensor attention(const Block& b, int64_t layer, const Tensor& x, const Batch& batch,
                   const std::vector<SequenceState*>& sequences);
  Tensor moe(const Block& b, const Tensor& x, const Batch& batch);
  Tensor head_logits(const Tensor& h, const Tensor& fn, const Tensor& base, const Tensor& scale, const Tensor& norm);
  // Rows and positions of a step; already_counted: the tokens are already in the lengths (MTP).
  Batch make_batch(const std::vector<SequenceState*>& sequences, const std::vector<std::vector<int32_t>>& tokens,
                   bool already_counted) const;

  ModelConfig config_;
  Backend& be_;
  CacheTypes caches_;
  Tensor embed_, head_, norm_, hc_head_fn_, hc_head_base_, hc_head_scale_;
  Tensor inv_freq_main_, inv_freq_compressed_;
  std::vector<std::unique_ptr<Block>> blocks_;  // main layers, then MTP blocks
  struct MtpExtras;
  std::vector<std::unique_ptr<MtpExtras>> mtp_;
};

}  // namespace tetra
