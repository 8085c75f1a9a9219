#include "ftworker/transfer/listen_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ft::worker {

namespace {

enum class Family { kNone, kV4, kV6 };

// Whether another node could reach `address`, and its family.
Family Reachable(const std::string& address) {
  in_addr v4{};
  if (inet_pton(AF_INET, address.c_str(), &v4) == 1) {
    const uint32_t a = ntohl(v4.s_addr);
    if (a == 0 || (a >> 24) == 127 || (a >> 16) == 0xa9fe) return Family::kNone;  // any, loopback, 169.254/16
    return Family::kV4;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, address.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_UNSPECIFIED(&v6) || IN6_IS_ADDR_LOOPBACK(&v6) || IN6_IS_ADDR_LINKLOCAL(&v6) ||
        IN6_IS_ADDR_V4MAPPED(&v6)) {
      return Family::kNone;
    }
    return Family::kV6;
  }
  return Family::kNone;
}

}  // namespace

ListenChoice ChooseListenAddress(std::string_view setting, std::string_view host,
                                 const std::vector<std::string>& resolved) {
  if (!setting.empty()) return ListenChoice{std::string(setting), ""};
  for (Family wanted : {Family::kV4, Family::kV6}) {
    for (const std::string& a : resolved) {
      if (Reachable(a) == wanted) return ListenChoice{a, ""};
    }
  }
  return ListenChoice{
      "127.0.0.1",
      fmt::format("the host name '{}' resolves to no address another node can reach ({}): the "
                  "transfer server listens on 127.0.0.1, so no peer on another node can pull this "
                  "node's checkpoint copies; set FT_LISTEN to this node's cluster address",
                  host, resolved.empty() ? std::string("it does not resolve")
                                         : fmt::format("only {}", fmt::join(resolved, ", ")))};
}

std::vector<std::string> ResolveHost(const std::string& host) {
  std::vector<std::string> out;
  if (host.empty()) return out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &list) != 0) return out;
  for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* where = ai->ai_family == AF_INET
                            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(ai->ai_addr)->sin_addr)
                            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(ai->ai_addr)->sin6_addr);
    if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6) &&
        inet_ntop(ai->ai_family, where, text, sizeof(text)) != nullptr) {
      std::string a(text);
      bool seen = false;
      for (const std::string& b : out) seen = seen || b == a;
      if (!seen) out.push_back(std::move(a));
    }
  }
  freeaddrinfo(list);
  return out;
}

}  // namespace ft::worker
