#pragma once
// The published config.json texts, generated at build time from tests/data (see
// src/bench/published_configs.cpp.in).
namespace tetra::bench {

extern const char* const kV4FlashConfigJson;
extern const char* const kV4ProConfigJson;

}  // namespace tetra::bench
