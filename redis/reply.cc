#include "redis/reply.h"

#include <charconv>
#include <utility>

namespace ft::redis {

Reply Reply::Integer(int64_t value) {
  Reply r;
  r.type_ = Type::kInteger;
  r.integer_ = value;
  return r;
}

Reply Reply::Text(Type type, std::string text) {
  Reply r;
  r.type_ = type;
  r.str_ = std::move(text);
  return r;
}

Reply Reply::String(std::string value) { return Text(Type::kString, std::move(value)); }
Reply Reply::Simple(std::string value) { return Text(Type::kStatus, std::move(value)); }
Reply Reply::Error(std::string message) { return Text(Type::kError, std::move(message)); }

Reply Reply::Array(std::vector<Reply> elements) {
  Reply r;
  r.type_ = Type::kArray;
  r.elements_ = std::move(elements);
  return r;
}

bool Reply::ToInt(int64_t* out) const {
  if (type_ == Type::kInteger) {
    *out = integer_;
    return true;
  }
  if (type_ != Type::kString && type_ != Type::kStatus) return false;
  int64_t value = 0;
  auto [end, ec] = std::from_chars(str_.data(), str_.data() + str_.size(), value);
  if (str_.empty() || ec != std::errc() || end != str_.data() + str_.size()) return false;
  *out = value;
  return true;
}

std::string Reply::DebugString() const {
  switch (type_) {
    case Type::kNil: return "nil";
    case Type::kInteger: return std::to_string(integer_);
    case Type::kString: return "\"" + str_ + "\"";
    case Type::kStatus: return str_;
    case Type::kError: return "(error) " + str_;
    case Type::kArray: {
      std::string out = "[";
      for (size_t i = 0; i < elements_.size(); ++i) {
        if (i) out += ", ";
        out += elements_[i].DebugString();
      }
      return out + "]";
    }
  }
  return "?";
}

namespace {

std::string_view FirstWord(std::string_view message) {
  return message.substr(0, message.find(' '));
}

}  // namespace

bool IsTransientServerError(std::string_view message) {
  std::string_view w = FirstWord(message);
  return w == "LOADING" || w == "BUSY" || w == "TRYAGAIN" || w == "CLUSTERDOWN" ||
         w == "MASTERDOWN" || w == "READONLY" || w == "OOM" || w == "NOREPLICAS" ||
         w == "MISCONF";
}

bool IsAclRefusal(std::string_view message) {
  return FirstWord(message) == "NOPERM" ||
         message.find("user executing the script can't access") != std::string_view::npos ||
         message.find("has no permissions to") != std::string_view::npos;
}

Status ServerErrorStatus(std::string_view where, std::string_view command,
                         std::string_view message) {
  std::string text = "Redis at " + std::string(where) + " refused " + std::string(command) +
                     ": " + std::string(message);
  std::string_view w = FirstWord(message);
  if (IsTransientServerError(message)) return Status::Unavailable(text + "; retrying later");
  if (w == "MOVED" || w == "ASK") {
    return Status::Unsupported(text + "; this server is a node of a Redis Cluster: give its "
                                      "nodes as FT_REDIS=redis+cluster://host:port,host:port");
  }
  if (w == "NOAUTH") {
    return Status::InvalidArgument(text + "; this Redis requires a password: set "
                                          "FT_REDIS_PASSWORD");
  }
  if (IsAclRefusal(message)) {
    return Status::InvalidArgument(text + "; the Redis user's ACL does not allow it: `ftmaster "
                                          "acl --job <job>` prints the rules each role needs");
  }
  if (message.rfind("ERR unknown command", 0) == 0) {
    return Status::Unsupported(text + "; ft needs Redis 5 or newer");
  }
  return Status::InvalidArgument(text);
}

}  // namespace ft::redis
