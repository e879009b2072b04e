#pragma once
// The OpenAI-compatible HTTP API over cpp-httplib: /v1/chat/completions, /v1/completions
// (whole answers and SSE streams, n choices each), /v1/models, /health, /metrics; bearer-key auth on /v1/*,
// a body size limit, OpenAI error bodies. A client that goes away before its answer is done
// (streamed or whole) cancels its sequence.
#include <httplib.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "runtime/scheduler.h"
#include "server/metrics.h"
#include "server/choices.h"
#include "server/openai_request.h"
#include "server/serving_model.h"
#include "server/text_stream.h"

namespace tetra::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port
  std::string api_key;  // empty: no authentication
  std::string served_model_name;
  size_t max_body_bytes = 8u << 20;
  int threads = 160;  // connections served at once (each stream holds one)
};

class OpenAiServer {
 public:
  OpenAiServer(ServingModel& model, Scheduler& scheduler, ServerOptions options);

  // Binds the socket and returns the port (the chosen one for port 0). Throws on failure.
  int bind();
  // Serves until stop().
  void listen();
  // Ends every request (cancelled) and makes listen() return; safe from another thread.
  void stop();

 private:
  void route();
  void chat_or_completion(Endpoint endpoint, const std::string& body, const httplib::Request& req, httplib::Response& res);
  void answer_whole(const OpenAiRequest& r, const std::string& id, const httplib::Request& req, httplib::Response& res);
  void answer_stream(const OpenAiRequest& r, const std::string& id, httplib::Response& res);
  // A choice's sequence in the scheduler, or the ApiError (429, 400) of its refusal.
  uint64_t submit(const GenerationRequest& g, std::shared_ptr<TextStream> stream);
  // Every choice of `r` submitted.
  std::unique_ptr<Choices> start(const OpenAiRequest& r);
  bool authorized(const httplib::Request& req) const;

  ServingModel& model_;
  Scheduler& scheduler_;
  ServerOptions options_;
  RequestLimits limits_;
  Metrics metrics_;
  httplib::Server http_;
  int port_ = 0;  // the port bind() listens on
  std::atomic<uint64_t> next_request_{1};
  std::atomic<bool> stopping_{false};
};

}  // namespace tetra::server
