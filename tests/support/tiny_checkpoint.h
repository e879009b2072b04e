#pragma once
// Writes random tiny DeepSeek-V4 checkpoints in any name family and weight format, so tests
// can read real files back: every layer kind (sliding, CSA, HCA), hash and routed MoE,
// optional MTP block, single file or sharded with an index.
#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "model/config.h"
#include "model/weight_names.h"

namespace tetra::testing {

enum class TinyQuant {
  bf16,       // every tensor dense
  fp8_mxfp4,  // official: FP8 128x128 blocks for attention/shared experts, MXFP4 routed experts
  nvfp4,      // ModelOpt MIXED_PRECISION: NVFP4 experts and q/kv/o_b projections, per-tensor FP8
              // wq_b, bf16 wo_a
};

struct TinyCheckpointOptions {
  NameFamily family = NameFamily::official;
  TinyQuant quant = TinyQuant::bf16;
  int shards = 1;              // > 1 writes model-0000i-of-0000n.safetensors + index
  bool with_mtp = false;
  bool fused_experts = false;  // transformers' gate_up_proj/down_proj form (hf_module, bf16)
  DType fp4_storage = DType::i8;  // MXFP4 weights as I8, U8 (packed pairs) or F4 (logical)
  uint64_t seed = 1;
  std::optional<ModelConfig> config{};  // default: tiny_config()
  bool header_only = false;  // tensors are sparse holes: a replica of a large checkpoint's headers
};

// A small config with every layer kind: ratios [0, 4, 8, 4], hash layer 0, one MTP layer.
ModelConfig tiny_config();

// Writes config.json (in the family's config shape), the tensors, and for ModelOpt NVFP4
// hf_quant_config.json into `dir` (created if needed).
void write_tiny_checkpoint(const std::string& dir, const TinyCheckpointOptions& options);

}  // namespace tetra::testing
