#include "server/api_error.h"

namespace tetra::server {
namespace {

const char* error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

}  // namespace

nlohmann::json ApiError::body() const {
  const auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
  return {{"error", {{"message", what()}, {"type", error_type(status_)}, {"param", or_null(param_)}, {"code", or_null(code_)}}}};
}

}  // namespace tetra::server
