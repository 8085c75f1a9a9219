// Where Redis is: redis://[user[:password]@]host[:port][/db] for one server, or
// redis+cluster://[user[:password]@]host[:port][,host[:port]...] for a Redis Cluster (the
// seed nodes asked for the slot map; any one reachable node is enough). The password belongs in
// FT_REDIS_PASSWORD (a URL shows up in process listings), but a URL may carry one; Redacted()
// is the only form of an Endpoint that may reach a log line or an error message.
#ifndef FT_REDIS_URL_H_
#define FT_REDIS_URL_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/config.h"
#include "common/status.h"

namespace ft::redis {

struct HostPort {
  std::string host;
  int port = 6379;
  bool operator==(const HostPort&) const = default;
};

struct Endpoint {
  std::string host;      // a name, an IPv4 address or an IPv6 address (without brackets)
  int port = 6379;       // with cluster: the first seed's
  std::string user;      // ACL user (Redis 6+); empty: the default user
  std::string password;  // empty: no AUTH
  int db = 0;            // SELECT when not 0 (never with cluster: a cluster has db 0 only)
  bool cluster = false;  // redis+cluster://: a Redis Cluster (redis/cluster.h)
  std::vector<HostPort> seeds;  // with cluster: every node of the URL, in its order

  bool operator==(const Endpoint&) const = default;
};

// Parses redis://[user[:password]@]host[:port][/db] and
// redis+cluster://[user[:password]@]host[:port][,host[:port]...] (no /db). User and password may be
// percent-encoded (%40 for '@'); an IPv6 host is written in brackets: redis://[::1]:6379.
// Anything else (another scheme, rediss:// (TLS), a query, a bad port) is kInvalidArgument
// or kUnsupported with a message that shows the URL without its password. `out` is set only
// on success.
Status ParseUrl(std::string_view url, Endpoint* out);

// "redis://user:***@host:port/db" (user, "***" and db only when set), for a cluster
// "redis+cluster://user:***@host:port,host:port": safe for logs.
std::string Redacted(const Endpoint& endpoint);

// The warning for a URL passed on a command line (`flag`, e.g. "--redis") that carries a
// password: every user of the host sees a process's arguments (ps, /proc/<pid>/cmdline).
// Names the fix (FT_REDIS_PASSWORD, or an env file) and never the password. Empty when the
// URL holds no password.
std::string PasswordInArgumentWarning(std::string_view url, std::string_view flag);

// The endpoint from the configuration: `url_override` (a --redis flag) when not empty, else
// FT_REDIS; FT_REDIS_USER and FT_REDIS_PASSWORD, when set, replace what the URL says.
// kNotFound when no address is configured at all (ftmaster then starts a local Redis).
Status EndpointFromConfig(const Config& config, std::string_view url_override, Endpoint* out);

}  // namespace ft::redis

#endif  // FT_REDIS_URL_H_
