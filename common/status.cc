#include "common/status.h"

#include <cerrno>
#include <cstring>

#include "common/names.h"

namespace ft {

namespace {
constexpr Named<StatusCode> kStatusCodeNames[] = {
    {StatusCode::kOk, "OK"}, {StatusCode::kNotReady, "NotReady"}, {StatusCode::kNotFound, "NotFound"},
    {StatusCode::kInvalidArgument, "InvalidArgument"}, {StatusCode::kCorrupt, "Corrupt"},
    {StatusCode::kUnsupported, "Unsupported"}, {StatusCode::kUnavailable, "Unavailable"},
    {StatusCode::kTimeout, "Timeout"}, {StatusCode::kIoError, "IoError"}, {StatusCode::kInternal, "Internal"}};
static_assert(NamesAreUnique(kStatusCodeNames));
}  // namespace

const char* StatusCodeName(StatusCode code) { return NameIn(kStatusCodeNames, code, "Unknown"); }

namespace {

// Keeps only the file name: full build paths make log lines long and leak directory layout.
const char* BaseName(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

StatusCode CodeForErrno(int err) {
  switch (err) {
    case ENOENT: return StatusCode::kNotFound;
    case EAGAIN: case EINTR: case EINPROGRESS: return StatusCode::kNotReady;
    case ETIMEDOUT: return StatusCode::kTimeout;
    case ECONNREFUSED: case ECONNRESET: case EHOSTUNREACH: case ENETUNREACH: case EPIPE:
      return StatusCode::kUnavailable;
    case EINVAL: case ERANGE: return StatusCode::kInvalidArgument;
    case ENOTSUP: return StatusCode::kUnsupported;
    default: return StatusCode::kIoError;
  }
}

}  // namespace

Status::Status(StatusCode code, std::string_view message, std::source_location where)
    : rep_(new Rep{code, std::string(message), BaseName(where.file_name()), where.line()}) {}

Status::Status(const Status& other)
    : rep_(other.rep_ ? std::make_unique<const Rep>(*other.rep_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) rep_ = other.rep_ ? std::make_unique<const Rep>(*other.rep_) : nullptr;
  return *this;
}

Status Status::FromErrno(int err, std::string_view what, std::source_location where) {
  std::string message(what);
  message += ": ";
  message += std::strerror(err);
  return Status(CodeForErrno(err), message, where);
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out = StatusCodeName(rep_->code);
  out += ": ";
  out += rep_->message;
  out += " (";
  out += rep_->file;
  out += ':';
  out += std::to_string(rep_->line);
  out += ')';
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  Status copy(*this);
  auto rep = std::make_unique<Rep>(*rep_);
  rep->message = std::string(context) + ": " + rep->message;
  copy.rep_ = std::move(rep);
  return copy;
}

}  // namespace ft
