// ft::Status: the one error type inside ft. A Status is either OK (costs one null pointer)
// or carries a code, a message and the source location where a foreign error (errno,
// cudaError_t, ncclResult_t, hiredis) entered our code. Converted once, at the boundary.
#ifndef FT_COMMON_STATUS_H_
#define FT_COMMON_STATUS_H_

#include <memory>
#include <source_location>
#include <string>
#include <string_view>

namespace ft {

// Ordered by what recovery the caller needs, from "nothing" to "give up".
enum class StatusCode : unsigned char {
  kOk = 0,
  kNotReady,         // in progress or would block: ask again later
  kNotFound,         // the thing is absent: create it or look elsewhere
  kInvalidArgument,  // the caller's input is wrong: fix the input, retrying won't help
  kCorrupt,          // foreign bytes failed validation: discard them, keep the rest
  kUnsupported,      // a version or feature we do not speak: upgrade one side
  kUnavailable,      // a peer or service is unreachable: retry with backoff
  kTimeout,          // a deadline passed: decide whether to wait longer
  kIoError,          // the OS refused (errno): check resources and permissions
  kInternal,         // a bug in ft: report it
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() noexcept = default;  // OK
  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;
  ~Status() = default;

  static Status Ok() { return Status(); }

#define FT_STATUS_FACTORY(Name)                                                        \
  static Status Name(std::string_view message,                                        \
                     std::source_location where = std::source_location::current()) { \
    return Status(StatusCode::k##Name, message, where);                               \
  }
  FT_STATUS_FACTORY(NotReady)
  FT_STATUS_FACTORY(NotFound)
  FT_STATUS_FACTORY(InvalidArgument)
  FT_STATUS_FACTORY(Corrupt)
  FT_STATUS_FACTORY(Unsupported)
  FT_STATUS_FACTORY(Unavailable)
  FT_STATUS_FACTORY(Timeout)
  FT_STATUS_FACTORY(IoError)
  FT_STATUS_FACTORY(Internal)
#undef FT_STATUS_FACTORY

  // An errno value from a failed call, e.g. FromErrno(errno, "shm_open /ft-job-3").
  // ENOENT maps to kNotFound, EAGAIN/EINTR to kNotReady, ETIMEDOUT to kTimeout,
  // ECONNREFUSED and friends to kUnavailable, EINVAL to kInvalidArgument, the rest to kIoError.
  static Status FromErrno(int err, std::string_view what,
                          std::source_location where = std::source_location::current());

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  // The message alone, without code or location; empty when OK.
  std::string_view message() const { return rep_ ? std::string_view(rep_->message) : ""; }
  // "Corrupt: record 12 has length 9000 (ring.cc:88)", or "OK".
  std::string ToString() const;

  // Prefixes the message with context, keeping code and location: "reading /dev/shm/x: ...".
  Status WithContext(std::string_view context) const;

 private:
  struct Rep {
    StatusCode code;
    std::string message;
    const char* file;  // static storage (from std::source_location)
    unsigned line;
  };

  Status(StatusCode code, std::string_view message, std::source_location where);

  std::unique_ptr<const Rep> rep_;
};

}  // namespace ft

// Returns the Status of `expr` from the enclosing function when it is not OK.
#define FT_RETURN_IF_ERROR(expr)            \
  do {                                      \
    ::ft::Status ft_status_ = (expr);       \
    if (!ft_status_.ok()) return ft_status_; \
  } while (0)

#endif  // FT_COMMON_STATUS_H_
