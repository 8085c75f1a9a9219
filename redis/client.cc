#include "redis/client.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <time.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <utility>

namespace ft::redis {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

timeval ToTimeval(milliseconds ms) {
  if (ms.count() < 1) ms = milliseconds{1};  // hiredis treats 0 as "no timeout"
  timeval tv;
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// The one place a redisReply becomes ours.
Reply Convert(const redisReply* r) {
  switch (r->type) {
    case REDIS_REPLY_INTEGER: return Reply::Integer(r->integer);
    case REDIS_REPLY_STRING: return Reply::String(std::string(r->str, r->len));
    case REDIS_REPLY_STATUS: return Reply::Simple(std::string(r->str, r->len));
    case REDIS_REPLY_ERROR: return Reply::Error(std::string(r->str, r->len));
    case REDIS_REPLY_ARRAY: {
      std::vector<Reply> elements;
      elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) elements.push_back(Convert(r->element[i]));
      return Reply::Array(std::move(elements));
    }
    default: return Reply::Nil();
  }
}

struct ArgvView {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  explicit ArgvView(const Argv& argv) {
    ptrs.reserve(argv.size());
    lens.reserve(argv.size());
    for (const std::string& a : argv) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
  }
  int argc() const { return static_cast<int>(ptrs.size()); }
};

void Log(Subsystem subsystem, LogLevel level, const std::string& line) {
  if (log::Enabled(subsystem, level)) log::Write(subsystem, level, line);
}

// Writing to a connection the server has reset raises SIGPIPE, whose default action kills
// the process: a daemon must not die because Redis did. For the duration of a hiredis call
// SIGPIPE is blocked in this thread only (the process's disposition is left alone), and one
// raised by our write is consumed before it is unblocked.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeGuard() {
    int saved = errno;
    if (!was_pending_) {
      sigset_t pending;
      sigemptyset(&pending);
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{0, 0};
        while (sigtimedwait(&pipe_, nullptr, &zero) < 0 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    errno = saved;
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool was_pending_ = false;
};

bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

}  // namespace

// --- Client ---------------------------------------------------------------------------------

Client::~Client() { Close(); }

Client::Client(Client&& other) noexcept
    : ctx_(std::exchange(other.ctx_, nullptr)),
      endpoint_(std::move(other.endpoint_)),
      io_timeout_(other.io_timeout_),
      current_timeout_(other.current_timeout_),
      broken_(std::exchange(other.broken_, false)),
      last_error_(std::move(other.last_error_)),
      refusals_logged_(std::move(other.refusals_logged_)) {}

Client& Client::operator=(Client&& other) noexcept {
  if (this != &other) {
    Close();
    ctx_ = std::exchange(other.ctx_, nullptr);
    endpoint_ = std::move(other.endpoint_);
    io_timeout_ = other.io_timeout_;
    current_timeout_ = other.current_timeout_;
    broken_ = std::exchange(other.broken_, false);
    last_error_ = std::move(other.last_error_);
    refusals_logged_ = std::move(other.refusals_logged_);
  }
  return *this;
}

void Client::Close() {
  if (ctx_ != nullptr) redisFree(ctx_);
  ctx_ = nullptr;
  broken_ = false;
}

std::string Client::Where() const {
  bool v6 = endpoint_.host.find(':') != std::string::npos;
  return (v6 ? "[" + endpoint_.host + "]" : endpoint_.host) + ":" +
         std::to_string(endpoint_.port);
}

Status Client::NotConnected() const {
  std::string text = "not connected to Redis at " + Where();
  if (!last_error_.ok()) text += " (" + std::string(last_error_.message()) + ")";
  return Status::Unavailable(text);
}

Status Client::SetTimeout(milliseconds timeout) {
  if (redisSetTimeout(ctx_, ToTimeval(timeout)) != REDIS_OK) {
    return Fail("setting the socket timeout", errno);
  }
  current_timeout_ = timeout;
  return Status::Ok();
}

Status Client::Fail(std::string_view doing, int err) {
  int code = ctx_ != nullptr ? ctx_->err : REDIS_ERR_OTHER;
  std::string why = ctx_ != nullptr ? ctx_->errstr : "no connection";
  std::string at = "Redis at " + Where();
  std::string what = " (" + std::string(doing) + ")";
  Status s;
  if (code == REDIS_ERR_IO &&
      (err == EAGAIN || err == EWOULDBLOCK || why == std::strerror(EAGAIN))) {
    s = Status::Timeout("no reply from " + at + " within " +
                        std::to_string(current_timeout_.count()) + " ms" + what +
                        ": the server is stuck or the network dropped");
  } else if (code == REDIS_ERR_EOF) {
    s = Status::Unavailable(at + " closed the connection" + what +
                            ": the server restarted or dropped this client");
  } else if (code == REDIS_ERR_PROTOCOL) {
    s = Status::Corrupt("protocol error from " + at + what + ": " + why +
                        "; is that address a Redis server?");
  } else if (code == REDIS_ERR_OOM) {
    s = Status::Internal("out of memory talking to " + at + what);
  } else {
    s = Status::Unavailable("lost the connection to " + at + what + ": " + why);
  }
  if (ctx_ != nullptr) redisFree(ctx_);
  ctx_ = nullptr;
  broken_ = true;
  last_error_ = s;
  return s;
}

Status Client::Connect(const Endpoint& endpoint, milliseconds connect_timeout,
                       milliseconds io_timeout) {
  Close();
  endpoint_ = endpoint;
  last_error_ = Status::Ok();
  io_timeout_ = io_timeout.count() > 0 ? io_timeout : connect_timeout;
  const auto deadline = SteadyClock::now() + connect_timeout;

  errno = 0;
  redisContext* c = redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port,
                                            ToTimeval(connect_timeout));
  int err = errno;
  if (c == nullptr) return Status::Internal("out of memory creating a Redis connection");
  if (c->err != 0) {
    std::string why = c->errstr;
    redisFree(c);
    std::string at = "Redis at " + Where();
    if (err == ECONNREFUSED || Contains(why, "refused")) {
      last_error_ = Status::Unavailable(at + " refused the connection: is redis-server running "
                                             "there, and is FT_REDIS right?");
    } else if (err == ETIMEDOUT || Contains(why, "timed out")) {
      last_error_ = Status::Timeout("no connection to " + at + " within " +
                                    std::to_string(connect_timeout.count()) +
                                    " ms: check the address and the network");
    } else if (Contains(why, "not known") || Contains(why, "name resolution") ||
               Contains(why, "No address")) {
      last_error_ = Status::Unavailable("cannot resolve the Redis host \"" + endpoint.host +
                                        "\": " + why + "; check FT_REDIS");
    } else {
      last_error_ = Status::Unavailable("cannot connect to " + at + ": " + why);
    }
    return last_error_;
  }
  ctx_ = c;
  Status s = Handshake(deadline);
  if (s.ok()) s = SetTimeout(io_timeout_);
  if (!s.ok()) {
    Close();  // a failed connect is not a broken connection: there was none
    last_error_ = s;
    return s;
  }
  return Status::Ok();
}

Status Client::HandshakeStep(const Argv& argv, SteadyClock::time_point deadline, Reply* out) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - SteadyClock::now());
  if (left.count() <= 0) {
    return Status::Timeout("Redis at " + Where() + " did not complete the handshake (" + argv[0] +
                           ") within the connect timeout");
  }
  FT_RETURN_IF_ERROR(SetTimeout(left));
  return RunRaw(argv, out);
}

Status Client::Handshake(SteadyClock::time_point deadline) {
  Reply r;
  std::string at = "Redis at " + Where();
  if (!endpoint_.password.empty() || !endpoint_.user.empty()) {
    Argv auth = {"AUTH"};
    if (!endpoint_.user.empty()) auth.push_back(endpoint_.user);
    auth.push_back(endpoint_.password);
    FT_RETURN_IF_ERROR(HandshakeStep(auth, deadline, &r));
    if (r.is_error()) {
      const std::string& m = r.str();
      std::string user = endpoint_.user.empty() ? "default" : endpoint_.user;
      if (m.rfind("WRONGPASS", 0) == 0 || Contains(m, "invalid password") ||
          Contains(m, "invalid username-password")) {
        return Status::InvalidArgument(
            at + " refused the password for user \"" + user + "\"" +
            (endpoint_.password.empty() ? " (no password was given)" : "") +
            ": set FT_REDIS_PASSWORD (and FT_REDIS_USER for an ACL user) to the right ones");
      }
      if (Contains(m, "without any password configured")) {
        Log(Subsystem::kCommon, LogLevel::kWarn,
            at + " needs no password but one is set; continuing. Unset FT_REDIS_PASSWORD, or "
                 "protect that Redis with requirepass");
      } else {
        return ServerErrorStatus(Where(), "AUTH", m);
      }
    }
  }
  if (endpoint_.db != 0) {
    FT_RETURN_IF_ERROR(HandshakeStep({"SELECT", std::to_string(endpoint_.db)}, deadline, &r));
    if (r.is_error()) {
      if (r.str().rfind("NOAUTH", 0) == 0 || IsAclRefusal(r.str())) {
        return ServerErrorStatus(Where(), "SELECT", r.str());
      }
      return Status::InvalidArgument(at + " has no database " + std::to_string(endpoint_.db) +
                                     " (" + r.str() + "): fix the /db part of FT_REDIS");
    }
  }
  // Proves the server speaks Redis and that no password is missing.
  FT_RETURN_IF_ERROR(HandshakeStep({"PING"}, deadline, &r));
  if (r.is_error()) return ServerErrorStatus(Where(), "PING", r.str());
  if (!r.Is("PONG")) {
    return Status::Corrupt(at + " answered PING with " + r.DebugString() +
                           ": is that address a Redis server?");
  }
  return Status::Ok();
}

Status Client::RunRaw(const Argv& argv, Reply* out) {
  if (argv.empty()) return Status::InvalidArgument("empty Redis command");
  if (ctx_ == nullptr) return NotConnected();
  ArgvView view(argv);
  void* raw;
  int err;
  {
    SigpipeGuard guard;
    errno = 0;
    raw = redisCommandArgv(ctx_, view.argc(), view.ptrs.data(), view.lens.data());
    err = errno;
  }
  if (raw == nullptr) return Fail(argv[0], err);
  auto* reply = static_cast<redisReply*>(raw);
  *out = Convert(reply);
  freeReplyObject(reply);
  return Status::Ok();
}

void Client::NoteRefusal(const Argv& argv, const Reply& reply) {
  if (!reply.is_error() || !IsAclRefusal(reply.str())) return;
  std::string command = argv[0];
  for (char& c : command) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!refusals_logged_.insert(command).second) return;
  const std::string user = endpoint_.user.empty() ? "default" : endpoint_.user;
  // The command's name and the server's message only: arguments may be values or secrets.
  Log(Subsystem::kCommon, LogLevel::kWarn,
      "Redis at " + Where() + " refused " + command + " to user \"" + user + "\": " + reply.str() +
          ". That user's ACL lacks what this program needs: `ftmaster acl --job <job>` prints "
          "the rules of each role (docs/redis-schema.md, \"Access control\"); until then this "
          "part of its work does not happen. Later refusals of " + command + " are not logged");
}

Status Client::Run(const Argv& argv, Reply* out, ErrorReplies errors) {
  Reply r;
  FT_RETURN_IF_ERROR(RunRaw(argv, &r));
  NoteRefusal(argv, r);
  if (r.is_error() && errors == ErrorReplies::kFail) {
    return ServerErrorStatus(Where(), argv[0], r.str());
  }
  *out = std::move(r);
  return Status::Ok();
}

Status Client::PipelinePartial(const std::vector<Argv>& commands, std::vector<Reply>* received) {
  received->clear();
  FT_RETURN_IF_ERROR(PipelineSend(commands));
  return PipelineReceive(commands, received);
}

Status Client::PipelineSend(const std::vector<Argv>& commands) {
  for (const Argv& argv : commands) {
    if (argv.empty()) return Status::InvalidArgument("empty Redis command in a pipeline");
  }
  if (ctx_ == nullptr) return NotConnected();
  SigpipeGuard guard;
  for (const Argv& argv : commands) {
    ArgvView view(argv);
    if (redisAppendCommandArgv(ctx_, view.argc(), view.ptrs.data(), view.lens.data()) !=
        REDIS_OK) {
      return Fail("queueing a pipeline", errno);
    }
  }
  int done = 0;
  while (!done) {
    errno = 0;
    if (redisBufferWrite(ctx_, &done) != REDIS_OK) {
      return Fail("sending a pipeline of " + std::to_string(commands.size()) + " commands", errno);
    }
  }
  return Status::Ok();
}

Status Client::PipelineReceive(const std::vector<Argv>& commands, std::vector<Reply>* received) {
  received->clear();
  if (ctx_ == nullptr) return NotConnected();
  SigpipeGuard guard;
  received->reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    errno = 0;
    if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) {
      return Fail("pipeline of " + std::to_string(commands.size()) + " commands, reply " +
                      std::to_string(i + 1) + " (" + commands[i][0] + ")",
                  errno);
    }
    auto* reply = static_cast<redisReply*>(raw);
    received->push_back(Convert(reply));
    freeReplyObject(reply);
    NoteRefusal(commands[i], received->back());
  }
  return Status::Ok();
}

Status Client::Pipeline(const std::vector<Argv>& commands, std::vector<Reply>* out) {
  std::vector<Reply> replies;
  FT_RETURN_IF_ERROR(PipelinePartial(commands, &replies));
  *out = std::move(replies);
  return Status::Ok();
}

// --- ReconnectingClient ---------------------------------------------------------------------

ReconnectingClient::ReconnectingClient(Endpoint endpoint, ReconnectPolicy policy)
    : endpoint_(std::move(endpoint)),
      policy_(policy),
      rng_(policy.seed != 0 ? policy.seed : std::random_device{}()) {}

milliseconds ReconnectBackoff(const ReconnectPolicy& policy, int failures, std::mt19937_64* rng) {
  int64_t base = policy.initial_backoff.count();
  int64_t cap = std::max<int64_t>(policy.max_backoff.count(), 1);
  for (int i = 1; i < failures && base < cap; ++i) base *= 2;
  base = std::min(base, cap);
  int64_t jitter = base / 5 > 0 ? static_cast<int64_t>((*rng)() % static_cast<uint64_t>(base / 5 + 1)) : 0;
  return milliseconds{std::max<int64_t>(base - jitter, 1)};
}

milliseconds ReconnectingClient::Backoff() {
  return ReconnectBackoff(policy_, failures_, &rng_);
}

bool ReconnectingClient::Ensure(Clock::time_point now) {
  if (client_.connected()) return true;
  if (client_.broken()) {
    last_error_ = client_.last_error();
    client_.Close();
    Log(policy_.log_subsystem, LogLevel::kWarn,
        "lost the connection to Redis: " + std::string(last_error_.message()) +
            ". Reconnecting in the background (backoff up to " +
            std::to_string(policy_.max_backoff.count()) + " ms); work continues meanwhile");
    reported_down_ = true;
    failures_ = 0;
    next_attempt_ = now;  // the first retry goes at once: most breaks are a single reset
  }
  if (now < next_attempt_) return false;

  ++attempts_;
  const Clock::time_point started = Clock::now();
  Status s = client_.Connect(endpoint_, policy_.connect_timeout, policy_.io_timeout);
  if (s.ok()) {
    if (reported_down_) {
      Log(policy_.log_subsystem, LogLevel::kInfo,
          "connected to Redis at " + Redacted(endpoint_) + " again after " +
              std::to_string(failures_) + " failed attempts");
    }
    if (++connects_ > 1) ++reconnects_;
    failures_ = 0;
    reported_down_ = false;
    last_error_ = Status::Ok();
    return true;
  }
  ++failures_;
  last_error_ = s;
  milliseconds delay = Backoff();
  if (!reported_down_) {
    Log(policy_.log_subsystem, LogLevel::kWarn,
        "cannot reach Redis: " + std::string(s.message()) + ". Retrying with backoff up to " +
            std::to_string(policy_.max_backoff.count()) + " ms; work continues meanwhile");
    reported_down_ = true;
  } else {
    Log(policy_.log_subsystem, LogLevel::kDebug,
        "Redis at " + Redacted(endpoint_) + " still unreachable (attempt " + std::to_string(failures_) +
            ", next in " + std::to_string(delay.count()) + " ms): " + std::string(s.message()));
  }
  // Counted from the end of this attempt: a slow failure does not make the next one due at once.
  next_attempt_ = now + (Clock::now() - started) + delay;
  return false;
}

}  // namespace ft::redis
