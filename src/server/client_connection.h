#pragma once
// The socket a request arrived on, so that a handler can tell when its client hangs up.
// httplib 0.11.4 (Debian 12) hands a handler no socket and no way to ask whether the peer is
// still there, so a whole (non-streamed) answer would run to max_tokens for nobody. The
// connection is found by its peer address among the process's sockets.
#include <optional>
#include <string>

namespace tetra::server {

class ClientConnection {
 public:
  // The accepted socket whose peer is remote_addr:remote_port and whose local port is
  // local_port; empty when none matches (the client already left, or an address httplib
  // could not read).
  static std::optional<ClientConnection> find(const std::string& remote_addr, int remote_port, int local_port);

  // True once the client has closed or reset the connection. Does not consume any bytes
  // (a pipelined next request stays for httplib to read).
  bool hung_up() const;

 private:
  explicit ClientConnection(int fd) : fd_(fd) {}
  int fd_;  // owned by httplib, open until the handler returns
};

}  // namespace tetra::server
