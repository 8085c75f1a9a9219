// Where Redis is: redis://[user[:password]@]host[:port][/db]. The password belongs in
// FT_REDIS_PASSWORD (a URL shows up in process listings), but a URL may carry one; Redacted()
// is the only form of an Endpoint that may reach a log line or an error message.
#ifndef FT_REDIS_URL_H_
#define FT_REDIS_URL_H_

#include <string>
#include <string_view>

#include "common/config.h"
#include "common/status.h"

namespace ft::redis {

struct Endpoint {
  std::string host;      // a name, an IPv4 address or an IPv6 address (without brackets)
  int port = 6379;
  std::string user;      // ACL user (Redis 6+); empty: the default user
  std::string password;  // empty: no AUTH
  int db = 0;            // SELECT when not 0

  bool operator==(const Endpoint&) const = default;
};

// Parses redis://[user[:password]@]host[:port][/db]. User and password may be
// percent-encoded (%40 for '@'); an IPv6 host is written in brackets: redis://[::1]:6379.
// Anything else (another scheme, rediss:// (TLS), a query, a bad port) is kInvalidArgument
// or kUnsupported with a message that shows the URL without its password. `out` is set only
// on success.
Status ParseUrl(std::string_view url, Endpoint* out);

// "redis://user:***@host:port/db" (user, "***" and db only when set): safe for logs.
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
