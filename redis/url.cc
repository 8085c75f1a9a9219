#include "redis/url.h"

#include <charconv>

namespace ft::redis {
namespace {

constexpr std::string_view kScheme = "redis://";
constexpr std::string_view kClusterScheme = "redis+cluster://";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool PercentDecode(std::string_view in, std::string* out) {
  std::string s;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      s += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;
    int hi = HexValue(in[i + 1]), lo = HexValue(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    s += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  *out = std::move(s);
  return true;
}

bool ParseInt(std::string_view text, int lo, int hi, int* out) {
  if (text.empty() || text.size() > 10) return false;
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < lo || value > hi) {
    return false;
  }
  *out = value;
  return true;
}

bool HostNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '-' || c == '.' || c == '_';
}

bool Ipv6Char(char c) { return HexValue(c) >= 0 || c == ':' || c == '.'; }

// The URL for messages: the password (between the first ':' of the user part and the last
// '@') becomes "***", so a typo never prints a secret.
std::string Shown(std::string_view url) {
  size_t scheme_end = url.find("://");
  size_t start = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  size_t at = url.rfind('@');
  if (at == std::string_view::npos || at < start) return std::string(url);
  size_t colon = url.find(':', start);
  if (colon == std::string_view::npos || colon > at) return std::string(url);
  return std::string(url.substr(0, colon)) + ":***" + std::string(url.substr(at));
}

Status Bad(std::string_view url, std::string_view why) {
  return Status::InvalidArgument("bad Redis URL \"" + Shown(url) + "\": " + std::string(why) +
                                 "; expected redis://[user[:password]@]host[:port][/db]");
}

// redis+cluster://[userinfo@]seed,seed...: each seed parsed as a redis:// URL's host[:port].
Status ParseClusterUrl(std::string_view url, Endpoint* out) {
  std::string_view rest = url.substr(kClusterScheme.size());
  std::string userinfo;
  size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    userinfo = std::string(rest.substr(0, at + 1));
    rest = rest.substr(at + 1);
  }
  if (rest.find('/') != std::string_view::npos) {
    return Status::InvalidArgument("bad Redis URL \"" + Shown(url) +
                                   "\": a Redis Cluster has database 0 only (no /db); expected "
                                   "redis+cluster://[user[:password]@]host[:port][,host[:port]...]");
  }
  Endpoint ep;
  ep.cluster = true;
  size_t start = 0;
  while (true) {
    size_t comma = rest.find(',', start);
    std::string_view seed = rest.substr(start, comma == std::string_view::npos ? comma : comma - start);
    if (seed.empty()) {
      return Status::InvalidArgument("bad Redis URL \"" + Shown(url) +
                                     "\": an empty node between commas; expected "
                                     "redis+cluster://[user[:password]@]host[:port][,host[:port]...]");
    }
    Endpoint one;
    Status s = ParseUrl(std::string(kScheme) + userinfo + std::string(seed), &one);
    if (!s.ok()) {
      return Status::InvalidArgument("bad Redis URL \"" + Shown(url) + "\": node \"" +
                                     std::string(seed) + "\": " + std::string(s.message()));
    }
    if (ep.seeds.empty()) {
      ep.host = one.host;
      ep.port = one.port;
      ep.user = one.user;
      ep.password = one.password;
    }
    ep.seeds.push_back({one.host, one.port});
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  *out = std::move(ep);
  return Status::Ok();
}

}  // namespace

Status ParseUrl(std::string_view url, Endpoint* out) {
  if (url.rfind(kClusterScheme, 0) == 0) return ParseClusterUrl(url, out);
  if (url.rfind("rediss://", 0) == 0) {
    return Status::Unsupported("Redis over TLS (\"" + Shown(url) +
                               "\") is not supported; use redis:// on a trusted network");
  }
  if (url.rfind("unix://", 0) == 0) {
    return Status::Unsupported("Redis over a unix socket (\"" + Shown(url) +
                               "\") is not supported; use redis://host:port");
  }
  if (url.rfind(kScheme, 0) != 0) {
    return Bad(url, "it must start with redis:// (a Redis Cluster: redis+cluster://)");
  }
  std::string_view rest = url.substr(kScheme.size());

  Endpoint ep;
  // The last '@' ends the user part: an unencoded '@', '/' or '?' in a password still works.
  size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    size_t colon = userinfo.find(':');
    std::string_view user = userinfo.substr(0, colon);
    if (!PercentDecode(user, &ep.user)) return Bad(url, "bad %-escape in the user name");
    if (colon != std::string_view::npos &&
        !PercentDecode(userinfo.substr(colon + 1), &ep.password)) {
      return Bad(url, "bad %-escape in the password");
    }
  }
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return Bad(url, "query strings and fragments are not supported");
  }
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    if (!db.empty() && !ParseInt(db, 0, 1 << 20, &ep.db)) {
      return Bad(url, "the database after '/' must be a number");
    }
  }

  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return Bad(url, "'[' without ']' around an IPv6 address");
    std::string_view host = authority.substr(1, close - 1);
    if (host.empty()) return Bad(url, "empty IPv6 address");
    for (char c : host) {
      if (!Ipv6Char(c)) return Bad(url, "bad character in the IPv6 address");
    }
    ep.host = std::string(host);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return Bad(url, "expected ':port' after the IPv6 address");
      port_text = after.substr(1);
      if (port_text.empty()) return Bad(url, "empty port after ':'");
    }
  } else {
    size_t colon = authority.find(':');
    std::string_view host = authority.substr(0, colon);
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return Bad(url, "empty port after ':'");
      if (port_text.find(':') != std::string_view::npos) {
        return Bad(url, "an IPv6 address must be written in brackets, e.g. redis://[::1]:6379");
      }
    }
    if (host.empty()) return Bad(url, "no host");
    for (char c : host) {
      if (!HostNameChar(c)) return Bad(url, "bad character in the host name");
    }
    ep.host = std::string(host);
  }
  if (!port_text.empty() && !ParseInt(port_text, 1, 65535, &ep.port)) {
    return Bad(url, "the port must be a number from 1 to 65535");
  }
  *out = std::move(ep);
  return Status::Ok();
}

std::string Redacted(const Endpoint& endpoint) {
  std::string out(endpoint.cluster ? kClusterScheme : kScheme);
  if (!endpoint.user.empty() || !endpoint.password.empty()) {
    out += endpoint.user;
    if (!endpoint.password.empty()) out += ":***";
    out += '@';
  }
  auto host_port = [](const std::string& host, int port) {
    bool v6 = host.find(':') != std::string::npos;
    return (v6 ? "[" + host + "]" : host) + ':' + std::to_string(port);
  };
  if (endpoint.cluster && !endpoint.seeds.empty()) {
    for (size_t i = 0; i < endpoint.seeds.size(); ++i) {
      if (i) out += ',';
      out += host_port(endpoint.seeds[i].host, endpoint.seeds[i].port);
    }
    return out;
  }
  out += host_port(endpoint.host, endpoint.port);
  if (endpoint.db != 0) out += '/' + std::to_string(endpoint.db);
  return out;
}

std::string PasswordInArgumentWarning(std::string_view url, std::string_view flag) {
  Endpoint ep;
  if (!ParseUrl(url, &ep).ok() || ep.password.empty()) return "";
  return "the Redis password in " + std::string(flag) + " \"" + Shown(url) +
         "\" is visible to every user of this host in the process list (ps, "
         "/proc/<pid>/cmdline); pass the address without it and put the password in "
         "FT_REDIS_PASSWORD (or the --redis-env file ftmaster writes, mode 0600)";
}

Status EndpointFromConfig(const Config& config, std::string_view url_override, Endpoint* out) {
  std::string_view url = url_override.empty() ? std::string_view(config.redis_url) : url_override;
  if (url.empty()) {
    return Status::NotFound("no Redis address: set FT_REDIS=redis://host:port (a Redis Cluster: "
                            "redis+cluster://host:port,host:port) or pass --redis");
  }
  Endpoint ep;
  FT_RETURN_IF_ERROR(ParseUrl(url, &ep));
  if (!config.redis_user.empty()) ep.user = config.redis_user;
  if (!config.redis_password.empty()) ep.password = config.redis_password;
  *out = std::move(ep);
  return Status::Ok();
}

}  // namespace ft::redis
