#include "server/http_server.h"

#include <chrono>

#include "core/error.h"
#include "server/api_error.h"
#include "server/answer_builder.h"
#include "server/choices.h"
#include "server/client_connection.h"
#include "server/openai_response.h"
#include "server/text_stream.h"

namespace tetra::server {
namespace {

using namespace std::chrono_literals;

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  res.set_content(dump(e.body()), "application/json");
}

ApiError body_too_large(size_t limit) {
  return ApiError(413, cat("the request body is larger than the limit of ", limit, " bytes"));
}

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Known paths keep their name as the metrics label; anything else is "other".
std::string endpoint_label(const std::string& path) {
  for (const char* known : {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics"})
    if (path == known) return path;
  return "other";
}

}  // namespace

OpenAiServer::OpenAiServer(ServingModel& model, Scheduler& scheduler, ServerOptions options)
    : model_(model), scheduler_(scheduler), options_(std::move(options)) {
  limits_.served_model_name = options_.served_model_name;
  limits_.context_length = model_.config().max_position_embeddings;
  limits_.vocab_size = model_.config().vocab_size;
  limits_.end_token_ids = model_.end_token_ids();
  limits_.json_masks = text::JsonTokenMasks::of_tokenizer(model_.tokenizer(), limits_.end_token_ids);
  route();
}

bool OpenAiServer::authorized(const httplib::Request& req) const {
  if (options_.api_key.empty() || !req.path.starts_with("/v1/")) return true;
  return req.get_header_value("Authorization") == "Bearer " + options_.api_key;
}

void OpenAiServer::route() {
  const int threads = options_.threads;
  http_.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  http_.set_payload_max_length(options_.max_body_bytes);
  http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError(401, "missing or wrong API key: send 'Authorization: Bearer <key>'", "", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors httplib answers itself (unknown path, body over the limit) get an OpenAI body too.
  http_.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 413)
      send_error(res, body_too_large(options_.max_body_bytes));
    else if (res.status == 404)
      send_error(res, ApiError(404, cat("no such endpoint: ", req.method, " ", req.path)));
    else
      send_error(res, ApiError(res.status, cat("the request failed with HTTP status ", res.status)));
    return httplib::Server::HandlerResponse::Handled;
  }));
  http_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, "internal error: " + what));
  });
  http_.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_.count_request(endpoint_label(req.path), res.status);
  });

  http_.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });
  http_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(scheduler_.stats()), "text/plain; version=0.0.4");
  });
  http_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const Json model = {{"id", options_.served_model_name}, {"object", "model"}, {"created", unix_time()},
                        {"owned_by", "tetra"}, {"max_model_len", limits_.context_length}};
    res.set_content(dump(Json{{"object", "list"}, {"data", Json::array({model})}}), "application/json");
  });
  // These read their own body: httplib 0.11.4 holds a body to the limit by its Content-Length
  // only, and reads a chunked one of any size into memory.
  const auto post = [this](Endpoint endpoint) {
    return [this, endpoint](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read) {
      std::string body;
      bool too_large = false;
      // Past the limit the rest is read and dropped, as httplib skips a long Content-Length
      // body, so that the connection can carry its next request.
      const auto keep = [&](const char* data, size_t size) {
        too_large = too_large || body.size() + size > options_.max_body_bytes;
        if (!too_large) body.append(data, size);
        return true;
      };
      // The plain reader would call an empty multipart handler on a multipart body.
      const bool multipart = req.is_multipart_form_data();
      const bool complete = multipart ? read([](const httplib::MultipartFormData&) { return true; }, keep) : read(keep);
      if (too_large || res.status == 413)  // 413: httplib skipped a body whose Content-Length is over the limit
        send_error(res, body_too_large(options_.max_body_bytes));
      else if (!complete)
        send_error(res, ApiError(400, "the request body could not be read (bad chunked or multipart encoding)"));
      else if (multipart)
        send_error(res, ApiError(400, "the request body must be JSON (Content-Type: application/json), not multipart/form-data"));
      else
        chat_or_completion(endpoint, body, req, res);
    };
  };
  http_.Post("/v1/chat/completions", post(Endpoint::chat));
  http_.Post("/v1/completions", post(Endpoint::completions));
}

void OpenAiServer::chat_or_completion(Endpoint endpoint, const std::string& body, const httplib::Request& req,
                                      httplib::Response& res) {
  try {
    if (stopping_) throw ApiError(503, "the server is shutting down");
    const OpenAiRequest r = read_request(endpoint, parse_body(body), model_.tokenizer(), limits_);
    const std::string id = (endpoint == Endpoint::chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_request_++);
    if (r.stream)
      answer_stream(r, id, res);
    else
      answer_whole(r, id, req, res);
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const Error& e) {  // the tokenizer's usage errors name the text at fault
    send_error(res, ApiError(e.code() == ExitCode::usage ? 400 : 500, e.what()));
  }
}

uint64_t OpenAiServer::submit(const GenerationRequest& g, std::shared_ptr<TextStream> stream) {
  const Scheduler::Submitted s = scheduler_.submit(g, std::move(stream));
  if (s.admission == Scheduler::Admission::queue_full)
    throw ApiError(429, "the server is at capacity (running and queued requests); retry later", "", "rate_limit_exceeded");
  if (s.admission == Scheduler::Admission::too_large) {
    const int64_t tokens = int64_t(g.prompt.size()) + g.max_tokens;
    bad_parameter("max_tokens", cat("the prompt plus 'max_tokens' (", tokens, " tokens) needs ", scheduler_.blocks_needed(tokens),
                                    " cache blocks and the server has ", scheduler_.stats().blocks_total, "; lower 'max_tokens'"));
  }
  return s.id;
}

std::unique_ptr<Choices> OpenAiServer::start(const OpenAiRequest& r) {
  return std::make_unique<Choices>(
      r, model_.tokenizer(), [this](bool first, double s) { metrics_.observe_token(first, s); }, scheduler_,
      [this](const GenerationRequest& g, std::shared_ptr<TextStream> stream) { return submit(g, std::move(stream)); });
}

void OpenAiServer::answer_whole(const OpenAiRequest& r, const std::string& id, const httplib::Request& req,
                                httplib::Response& res) {
  const std::unique_ptr<Choices> choices = start(r);
  // A client that hangs up before its answer is whole frees its sequences, as a stream's does.
  const auto client = ClientConnection::find(req.remote_addr, req.remote_port, port_);
  std::vector<TextStream::Update> all(size_t(choices->size()));
  while (!choices->finished()) {
    if (client && client->hung_up()) {
      choices->abandon();
      res.status = 499;  // nobody reads it; the access log and metrics see a client that left
      return;
    }
    for (auto& [i, u] : choices->wait(250ms)) {
      TextStream::Update& a = all[size_t(i)];
      a.tokens.insert(a.tokens.end(), u.tokens.begin(), u.tokens.end());
      a.text += u.text;
      a.finished = u.finished;
      a.reason = u.reason;
      a.error = u.error;
    }
  }
  const int64_t prompt_tokens = int64_t(r.generation.prompt.size());
  int64_t completion_tokens = 0;
  for (const auto& a : all) completion_tokens += int64_t(a.tokens.size());
  metrics_.count_tokens(prompt_tokens, completion_tokens);
  for (const auto& a : all) {
    if (a.reason == FinishReason::error) throw ApiError(500, "generation failed: " + a.error);
    if (a.reason == FinishReason::cancelled) throw ApiError(503, "the request was cancelled: the server is shutting down");
  }
  const ResponseHeader header{id, unix_time(), options_.served_model_name};
  Json list = Json::array();
  for (size_t i = 0; i < all.size(); ++i) list.push_back(AnswerBuilder(r, model_.tokenizer(), header, int64_t(i)).choice(all[i]));
  res.set_content(dump(whole_response(header, r.endpoint, std::move(list), prompt_tokens, completion_tokens)), "application/json");
}

void OpenAiServer::answer_stream(const OpenAiRequest& r, const std::string& id, httplib::Response& res) {
  // Lives as long as the response: the builders refer to the request it holds.
  struct State {
    OpenAiRequest request;
    ResponseHeader header;
    std::unique_ptr<Choices> choices;
    std::vector<AnswerBuilder> builders;
    bool started = false, done = false;
    std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
  };
  auto state = std::make_shared<State>();
  state->request = r;
  state->header = {id, unix_time(), options_.served_model_name};
  state->choices = start(state->request);
  for (int64_t i = 0; i < r.n; ++i) state->builders.emplace_back(state->request, model_.tokenizer(), state->header, i);

  res.set_chunked_content_provider(
      "text/event-stream",
      [this, state](size_t, httplib::DataSink& sink) {
        const OpenAiRequest& request = state->request;
        std::string out;
        if (!state->started && request.endpoint == Endpoint::chat)
          for (const AnswerBuilder& b : state->builders) out += sse_event(b.first_chunk());
        state->started = true;
        for (const auto& [i, u] : state->choices->wait(250ms)) {
          if (u.finished && u.reason == FinishReason::error) {
            out += sse_event(ApiError(500, "generation failed: " + u.error).body());
          } else {
            for (const Json& chunk : state->builders[size_t(i)].chunks(u)) out += sse_event(chunk);
          }
        }
        const bool finished = state->choices->finished();
        if (finished) {
          const int64_t prompt_tokens = int64_t(request.generation.prompt.size());
          int64_t completion_tokens = 0;
          for (const AnswerBuilder& b : state->builders) completion_tokens += b.completion_tokens();
          if (request.include_usage) out += sse_event(usage_chunk(state->header, request.endpoint, prompt_tokens, completion_tokens));
          out += "data: [DONE]\n\n";
          metrics_.count_tokens(prompt_tokens, completion_tokens);
        }
        // A comment line now and then finds a client that left while nothing was generated.
        const auto now = std::chrono::steady_clock::now();
        if (out.empty() && now - state->last_write > 1s) out = ": keep-alive\n\n";
        if (!out.empty()) {
          if (!sink.write(out.data(), out.size())) return false;
          state->last_write = now;
        }
        if (finished) {
          state->done = true;
          sink.done();
        }
        return true;
      },
      [state](bool) {
        if (!state->done) state->choices->abandon();
      });
}

int OpenAiServer::bind() {
  const int port = options_.port == 0 ? http_.bind_to_any_port(options_.host) : (http_.bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port < 0) runtime_error("cannot listen on ", options_.host, ":", options_.port);
  port_ = port;
  return port;
}

void OpenAiServer::listen() { http_.listen_after_bind(); }

void OpenAiServer::stop() {
  stopping_ = true;
  scheduler_.cancel_all();
  http_.stop();
}

}  // namespace tetra::server
