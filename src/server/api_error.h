#pragma once
// An error answer of the OpenAI API: HTTP status plus the {"error": {...}} body.
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace tetra::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = "", std::string code = "")
      : std::runtime_error(message), status_(status), param_(std::move(param)), code_(std::move(code)) {}

  int status() const { return status_; }
  nlohmann::json body() const;

 private:
  int status_;
  std::string param_, code_;
};

// A 400 naming the request parameter at fault.
[[noreturn]] inline void bad_parameter(const std::string& param, const std::string& message) {
  throw ApiError(400, message, param);
}

}  // namespace tetra::server
