// tetra quantize: a bf16/f16/f32 DeepSeek-V4 checkpoint (any name family) rewritten as NVIDIA
// ModelOpt NVFP4 (transformers module names) or as the official FP8 + MXFP4 layout.
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/progress.h"
#include "io/checkpoint_writer.h"
#include "io/mapped_file.h"
#include "model/config_writer.h"
#include "model/quantizers.h"
#include "model/weight_names.h"
#include "model/weights.h"

namespace tetra {
namespace {
namespace fs = std::filesystem;

enum class TargetLayout { nvfp4, fp8_mxfp4 };

// Layers both published layouts keep in 16 bits: the router, the compressors (computed in
// f32), the indexer's head weights and the output head; NVIDIA's NVFP4 also keeps wo_a.
WeightFormat target_format(const std::string& role, TargetLayout layout) {
  if (role == "head" || role.ends_with("ffn.gate") || role.find(".compressor.") != std::string::npos ||
      role.ends_with("indexer.weights_proj"))
    return WeightFormat::dense;
  if (layout == TargetLayout::nvfp4) return role.ends_with("attn.wo_a") ? WeightFormat::dense : WeightFormat::nvfp4;
  return role.find(".experts.") != std::string::npos && role.find("shared_experts") == std::string::npos
             ? WeightFormat::mxfp4
             : WeightFormat::fp8_block;
}

// Checked before anything is written, so a checkpoint that cannot be quantized leaves nothing.
void check_block_sizes(const ModelWeights& weights, TargetLayout layout, const std::string& input) {
  for (const LinearWeight* l : weights.linears()) {
    const WeightFormat target = target_format(l->role, layout);
    const int64_t block = target == WeightFormat::nvfp4 ? 16 : target == WeightFormat::mxfp4 ? 32 : 1;
    if (l->in % block)
      model_error(input, ": tensor ", l->sources[0], " has input dimension ", l->in, ", not divisible by the ",
                  weight_format_name(target), " block of ", block);
  }
}

std::vector<std::byte> copy_bytes(const TensorView& v) { return std::vector<std::byte>(v.data, v.data + v.nbytes); }

std::vector<std::byte> f32_bytes(float x) {
  std::vector<std::byte> b(4);
  std::memcpy(b.data(), &x, 4);
  return b;
}

}  // namespace

int run_quantize(const std::vector<std::string>& argv) {
  const Args args(argv, {"input", "output", "format", "shard-size-mb"}, {});
  const std::string input = args.required("input"), output = args.required("output");
  const std::string format = args.required("format");
  if (format != "nvfp4" && format != "fp8-mxfp4") usage_error("--format must be nvfp4 or fp8-mxfp4, got '", format, "'");
  const TargetLayout layout = format == "nvfp4" ? TargetLayout::nvfp4 : TargetLayout::fp8_mxfp4;
  const std::string shard_arg = args.get_or("shard-size-mb", "4096");
  char* end = nullptr;
  const double shard_mb = std::strtod(shard_arg.c_str(), &end);
  if (end == shard_arg.c_str() || *end || !(shard_mb > 0)) usage_error("--shard-size-mb must be a positive number, got '", shard_arg, "'");

  const ModelConfig config = load_model_config(input);
  const TensorStore store(input);
  const ModelWeights weights(config, store);
  for (const LinearWeight* l : weights.linears())
    if (l->format != WeightFormat::dense)
      model_error(input, ": tensor ", l->sources[0], " is already ", weight_format_name(l->format),
                  "; tetra quantize needs a bf16/f16/f32 checkpoint");

  check_block_sizes(weights, layout, input);

  const NameFamily family = layout == TargetLayout::nvfp4 ? NameFamily::hf_module : NameFamily::official;
  const auto name = [&](const std::string& canonical) { return family_tensor_name(canonical, family); };
  CheckpointWriter writer(output, uint64_t(shard_mb * double(1 << 20)));
  Progress progress("quantize", int64_t(weights.linears().size() + weights.params().size()));

  for (const LinearWeight* l : weights.linears()) {
    progress.step(l->role);
    const WeightFormat target = target_format(l->role, layout);
    if (target == WeightFormat::dense) {
      writer.add(name(l->role + ".weight"), l->weight.dtype, {l->out, l->in}, copy_bytes(l->weight));
      continue;
    }
    const std::vector<float> w = dequantize(*l);
    QuantizedLinear q = target == WeightFormat::nvfp4       ? quantize_nvfp4(w.data(), l->out, l->in)
                        : target == WeightFormat::mxfp4     ? quantize_mxfp4(w.data(), l->out, l->in)
                                                            : quantize_fp8_block(w.data(), l->out, l->in);
    writer.add(name(l->role + ".weight"), q.weight.dtype, q.weight.shape, std::move(q.weight.bytes));
    if (target == WeightFormat::nvfp4) {
      writer.add(name(l->role + ".weight_scale"), q.scale.dtype, q.scale.shape, std::move(q.scale.bytes));
      writer.add(name(l->role + ".weight_scale_2"), DType::f32, {}, f32_bytes(q.global_scale));
    } else {
      writer.add(name(l->role + ".scale"), q.scale.dtype, q.scale.shape, std::move(q.scale.bytes));
    }
  }
  for (const ParamWeight* p : weights.params()) {
    progress.step(p->role);
    writer.add(name(p->role), p->view.dtype, p->view.shape, copy_bytes(p->view));
  }

  ModelConfig out = config;
  if (layout == TargetLayout::nvfp4) {
    out.quant = {"modelopt", "NVFP4", ""};
    writer.write_file("config.json", model_config_json(out, ConfigForm::transformers));
    const nlohmann::json hf_quant = {
        {"producer", {{"name", "tetra"}}},
        {"quantization",
         {{"quant_algo", "NVFP4"}, {"group_size", 16}, {"kv_cache_quant_algo", nullptr},
          {"exclude_modules", {"lm_head", "*.mlp.gate", "*.self_attn.o_a_proj", "*.self_attn.compressor*",
                               "*.indexer.scorer.weights_proj"}}}}};
    writer.write_file("hf_quant_config.json", hf_quant.dump(2));
  } else {
    out.quant = {"fp8", "", "fp4"};
    writer.write_file("config.json", model_config_json(out, ConfigForm::legacy));
  }
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json", "special_tokens_map.json"})
    if (entry_exists((fs::path(input) / f).string())) writer.copy_file((fs::path(input) / f).string());
  writer.commit();
  std::fprintf(stderr, "quantize: wrote %s (%s)\n", output.c_str(), format.c_str());
  return 0;
}

}  // namespace tetra
