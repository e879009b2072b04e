#include "server/client_connection.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace tetra::server {
namespace {

// The numeric host and the port of a socket address, as httplib writes them into a Request.
bool host_and_port(const sockaddr_storage& a, std::string& host, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    port = ntohs(v4.sin_port);
    if (!inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text)) return false;
  } else if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    port = ntohs(v6.sin6_port);
    if (!inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text)) return false;
  } else {
    return false;
  }
  host = text;
  return true;
}

bool endpoint_of(int fd, bool peer, std::string& host, int& port) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  const int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
                      : ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return rc == 0 && host_and_port(a, host, port);
}

}  // namespace

std::optional<ClientConnection> ClientConnection::find(const std::string& remote_addr, int remote_port, int local_port) {
  if (remote_addr.empty() || remote_port <= 0) return std::nullopt;
  const std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir("/proc/self/fd"), ::closedir);
  if (!dir) return std::nullopt;
  while (const dirent* e = ::readdir(dir.get())) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end) continue;  // "." and ".."
    std::string host;
    int port = 0;
    if (!endpoint_of(int(fd), true, host, port) || host != remote_addr || port != remote_port) continue;
    if (!endpoint_of(int(fd), false, host, port) || port != local_port) continue;
    return ClientConnection(int(fd));
  }
  return std::nullopt;
}

bool ClientConnection::hung_up() const {
  char byte;
  const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;   // the client sent more (a pipelined request): still there
  if (n == 0) return true;   // orderly close
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;  // reset or broken
}

}  // namespace tetra::server
