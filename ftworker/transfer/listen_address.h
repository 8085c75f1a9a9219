// Which address ftworker's transfer server binds (FT_LISTEN): the node's cluster address, so
// checkpoint copies are reachable from the other nodes and from nowhere else. Never every
// interface (0.0.0.0, ::) unless FT_LISTEN says so.
#ifndef FT_FTWORKER_LISTEN_ADDRESS_H_
#define FT_FTWORKER_LISTEN_ADDRESS_H_

#include <string>
#include <string_view>
#include <vector>

namespace ft::worker {

struct ListenChoice {
  std::string address;
  std::string warning;  // for the log; empty when the choice is the expected one
};

// `setting` (FT_LISTEN) when set; otherwise the first address `host` resolved to (`resolved`,
// numeric, in resolver order) that another node can reach — IPv4 before IPv6, never loopback,
// link-local or unspecified; otherwise 127.0.0.1 with a warning saying to set FT_LISTEN.
ListenChoice ChooseListenAddress(std::string_view setting, std::string_view host,
                                 const std::vector<std::string>& resolved);

// The addresses `host` resolves to (getaddrinfo), numeric; empty when it does not resolve.
std::vector<std::string> ResolveHost(const std::string& host);

}  // namespace ft::worker

#endif  // FT_FTWORKER_LISTEN_ADDRESS_H_
