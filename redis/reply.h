// A Redis reply as a plain value, converted from hiredis's redisReply once, where it enters ft
// (client.cc); nothing else in ft sees hiredis types.
#ifndef FT_REDIS_REPLY_H_
#define FT_REDIS_REPLY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ft::redis {

class Reply {
 public:
  enum class Type { kNil, kInteger, kString, kStatus, kError, kArray };

  Reply() = default;  // nil
  static Reply Nil() { return Reply(); }
  static Reply Integer(int64_t value);
  static Reply String(std::string value);  // a bulk string (binary-safe)
  static Reply Simple(std::string value);  // a status reply: "OK", "PONG"
  static Reply Error(std::string message); // "WRONGTYPE Operation against a key ..."
  static Reply Array(std::vector<Reply> elements);

  Type type() const { return type_; }
  bool is_nil() const { return type_ == Type::kNil; }
  bool is_integer() const { return type_ == Type::kInteger; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_status() const { return type_ == Type::kStatus; }
  bool is_error() const { return type_ == Type::kError; }
  bool is_array() const { return type_ == Type::kArray; }

  // 0 unless an integer.
  int64_t integer() const { return integer_; }
  // The text of a string, status or error reply; empty otherwise.
  const std::string& str() const { return str_; }
  // The elements of an array; empty otherwise.
  const std::vector<Reply>& elements() const { return elements_; }
  size_t size() const { return elements_.size(); }
  const Reply& operator[](size_t i) const { return elements_[i]; }

  // A string or status reply equal to `text`.
  bool Is(std::string_view text) const {
    return (type_ == Type::kString || type_ == Type::kStatus) && str_ == text;
  }
  // An integer, or a string holding a decimal integer (Redis returns both), into *out.
  bool ToInt(int64_t* out) const;

  // For messages and tests: 'nil', '42', '"text"', 'OK', '(error) ERR ...', '[1, "a"]'.
  std::string DebugString() const;

  bool operator==(const Reply&) const = default;

 private:
  static Reply Text(Type type, std::string text);  // a string, status or error reply

  Type type_ = Type::kNil;
  int64_t integer_ = 0;
  std::string str_;
  std::vector<Reply> elements_;
};

// Server error replies that go away by themselves (a loading or busy server, a failover in
// progress, out of memory until something expires): worth retrying later. Anything else
// (WRONGTYPE, a syntax error, NOAUTH) will fail the same way again.
bool IsTransientServerError(std::string_view message);

// A refusal by the server's ACL: the user may not run that command or touch that key
// (NOPERM), also from inside a script (Redis 7 says "ERR ... The user executing the script
// can't access ..."). It will fail the same way until an operator changes the user's rules.
bool IsAclRefusal(std::string_view message);

// The Status for an error reply: kUnavailable for transient ones, kUnsupported for cluster
// redirects that reach a single-server Client and for unknown commands, kInvalidArgument for
// the rest. `command` is the command name only (never arguments: AUTH's is a password).
Status ServerErrorStatus(std::string_view where, std::string_view command,
                         std::string_view message);

}  // namespace ft::redis

#endif  // FT_REDIS_REPLY_H_
