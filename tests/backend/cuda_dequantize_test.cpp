// The device dequantizer equals the CPU reference bit for bit on every weight format.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "backend/cuda/dequantize.h"
#include "backend/cuda/device.h"
#include "support/tiny_checkpoint.h"

namespace tetra {
namespace {
namespace fs = std::filesystem;

TEST(CudaDequantize, MatchesCpuOnEveryFormat) {
  const cuda::DeviceStatus device = cuda::probe_device();
  if (!device.usable) GTEST_SKIP() << "GPU test skipped: " << device.description;
  std::printf("device: %s\n", device.description.c_str());

  for (auto quant : {testing::TinyQuant::bf16, testing::TinyQuant::fp8_mxfp4, testing::TinyQuant::nvfp4}) {
    const fs::path dir = fs::temp_directory_path() / ("tetra_cuda_dq_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    testing::TinyCheckpointOptions o;
    o.quant = quant;
    o.fp4_storage = DType::u8;
    testing::write_tiny_checkpoint(dir.string(), o);
    const ModelConfig config = load_model_config(dir.string());
    const TensorStore store(dir.string());
    const ModelWeights weights(config, store);
    for (const LinearWeight* w : weights.linears()) {
      const std::vector<float> want = dequantize(*w);
      const cuda::DeviceLinear d = cuda::upload_linear(*w, nullptr);
      cuda::DeviceBuffer out(want.size() * sizeof(float));
      cuda::dequantize_to_f32(d, out.get<float>(), nullptr);
      std::vector<float> got(want.size());
      TETRA_CUDA_CHECK(cudaMemcpy(got.data(), out.get(), out.bytes(), cudaMemcpyDeviceToHost));
      ASSERT_EQ(std::memcmp(got.data(), want.data(), out.bytes()), 0)
          << w->role << " (" << weight_format_name(w->format) << ")";
    }
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace tetra
