// The NaN scan of NVFP4 block scales (host code of the CUDA backend: runs without a GPU).
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "backend/cuda/scale_checks.h"
#include "core/error.h"

namespace tetra {
namespace {

// Every length up to three words and a tail, a NaN (either sign) at every position: the first
// one found, whether it lies in a whole eight-byte word or in the bytes after the last one; the
// bytes nearest NaN (0x7E, 0xFE, 0x7B: six of the seven low bits set) are not NaN.
TEST(CudaScaleChecks, FirstNanInWordsAndTail) {
  for (size_t n = 0; n <= 27; ++n) {
    std::vector<uint8_t> bytes(n);
    for (size_t i = 0; i < n; ++i) bytes[i] = std::array<uint8_t, 4>{0x7E, 0xFE, 0x3A, 0x7B}[i % 4];
    EXPECT_EQ(cuda::first_e4m3_nan(bytes.data(), n), n) << "no NaN, " << n << " bytes";
    for (size_t at = 0; at < n; ++at)
      for (uint8_t nan : {uint8_t(0x7F), uint8_t(0xFF)}) {
        std::vector<uint8_t> b = bytes;
        b[at] = nan;
        if (at + 1 < n) b[n - 1] = 0xFF;  // a later NaN does not hide the first
        EXPECT_EQ(cuda::first_e4m3_nan(b.data(), n), at) << n << " bytes, NaN at " << at;
      }
  }
}

// The error names the scale tensor, the row and the inputs of the block (a NaN in the tail: 3 × 48
// inputs have 9 block scales).
TEST(CudaScaleChecks, NanScaleNamesTensorRowAndInputs) {
  std::vector<uint8_t> codes(3 * 48 / 2, 0x11), scales(9, 0x38);
  scales[8] = 0xFF;
  LinearWeight w;
  w.role = "layers.1.ffn.experts.2.w3";
  w.sources = {"layers.1.ffn.experts.2.w3.weight", "layers.1.ffn.experts.2.w3.weight_scale"};
  w.format = WeightFormat::nvfp4;
  w.out = 3;
  w.in = 48;
  w.weight = TensorView{DType::u8, {3, 24}, reinterpret_cast<const std::byte*>(codes.data()), codes.size()};
  w.scale = TensorView{DType::f8_e4m3, {3, 3}, reinterpret_cast<const std::byte*>(scales.data()), scales.size()};
  try {
    cuda::check_nvfp4_scales(w);
    FAIL() << "a NaN scale passed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::model);
    const std::string message = e.what();
    EXPECT_NE(message.find("layers.1.ffn.experts.2.w3.weight_scale"), std::string::npos) << message;
    EXPECT_NE(message.find("row 2, inputs 32..47"), std::string::npos) << message;
    EXPECT_NE(message.find("0xff"), std::string::npos) << message;
  }
  scales[8] = 0x38;
  EXPECT_NO_THROW(cuda::check_nvfp4_scales(w));
}

}  // namespace
}  // namespace tetra
