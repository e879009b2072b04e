// tetra serve: the OpenAI-compatible server on one model until SIGINT or SIGTERM.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <iostream>
#include <thread>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "core/error.h"
#include "server/http_server.h"

namespace tetra {
namespace {

sigset_t shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

int run_serve(const std::vector<std::string>& argv) {
  std::set<std::string> valued = model_option_names();
  valued.insert({"host", "port", "api-key", "served-model-name", "max-body-bytes"});
  const Args args(argv, valued, {});

  // Signals are taken by one thread with sigtimedwait, so no handler and no global state: block
  // them here, before any thread starts, and every thread inherits the mask.
  const sigset_t signals = shutdown_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that went away is a failed write, not a dead server

  server::ServerOptions options;
  options.host = args.get_or("host", options.host);
  if (args.get("port")) {
    const std::string p = *args.get("port");
    if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos || std::stoi(p) > 65535)
      usage_error("--port must be an integer in [0, 65535] (0: any free port), got '", p, "'");
    options.port = std::stoi(p);
  }
  options.api_key = args.get_or("api-key", "");
  options.served_model_name = args.get_or("served-model-name", args.get_or("model", server::kDemoModelDir));
  options.max_body_bytes = size_t(positive_integer_option(args, "max-body-bytes", int64_t(options.max_body_bytes)));

  const auto model = load_serving_model(args);
  const auto scheduler = make_scheduler(args, *model);
  std::cout << "tetra serve: " << describe_cache_capacity(*scheduler, *model) << std::endl;
  if (const int64_t ranks = model->model().ranks(); ranks > 1)
    std::cout << "tetra serve: the routed experts split over " << ranks << " ranks (" << model->backend().name()
              << "), each with its own copy of the cache pool" << std::endl;
  if (const SpeculativeMethod m = speculation_option(args); m != SpeculativeMethod::off)
    std::cout << "tetra serve: speculative decoding, drafts by " << speculative_method_name(m) << " (one a step)" << std::endl;
  server::OpenAiServer http(*model, *scheduler, options);
  const int port = http.bind();
  std::cout << "tetra serve: listening on http://" << options.host << ":" << port << " (model '" << options.served_model_name
            << "', " << scheduler->stats().blocks_total << " cache blocks)" << std::endl;

  std::atomic<bool> listening_ended{false};
  std::thread signal_waiter([&] {
    const timespec tick{0, 200'000'000};
    while (!listening_ended) {
      const int sig = sigtimedwait(&signals, nullptr, &tick);
      if (sig == SIGINT || sig == SIGTERM) {
        std::cout << "tetra serve: signal " << sig << ", shutting down" << std::endl;
        http.stop();
        return;
      }
    }
  });
  http.listen();
  listening_ended = true;
  signal_waiter.join();
  return 0;
}

}  // namespace tetra
