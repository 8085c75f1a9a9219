// A blocking Redis client over hiredis, and a reconnecting wrapper for daemon loops.
//
// Not thread-safe: one Client (or ReconnectingClient) belongs to one thread. Every call blocks
// at most the timeouts it was given (connect_timeout while connecting, io_timeout per reply);
// host names are resolved by getaddrinfo, which has no timeout: give an IP address where that
// matters.
//
// Errors become a Status here, once: kUnavailable (refused, reset, closed: retry with
// backoff), kTimeout (no answer in time), kInvalidArgument (wrong password, wrong type, bad
// command), kUnsupported (cluster redirect, too old a server), kCorrupt (protocol garbage).
// Messages name host:port and never the password.
#ifndef FT_REDIS_CLIENT_H_
#define FT_REDIS_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "redis/reply.h"
#include "redis/store.h"
#include "redis/url.h"

struct redisContext;

namespace ft::redis {

class Client : public Commands {
 public:
  Client() = default;
  ~Client() override;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  Client(Client&& other) noexcept;
  Client& operator=(Client&& other) noexcept;

  // TCP connect, AUTH (`AUTH user password` when a user is set), SELECT when db != 0, and a
  // PING; the whole handshake takes at most `connect_timeout`. Afterwards each reply may take
  // up to `io_timeout` (0: the same as connect_timeout). Closes any previous connection first.
  Status Connect(const Endpoint& endpoint, std::chrono::milliseconds connect_timeout,
                 std::chrono::milliseconds io_timeout = std::chrono::milliseconds{0});
  // Closes the connection (if any) and forgets that it broke.
  void Close();

  // Connected and no I/O error since. After an I/O error or timeout the connection is closed
  // and broken() is true until the next Connect (a half-read reply cannot be resynchronized).
  bool connected() const override { return ctx_ != nullptr; }
  bool broken() const { return broken_; }
  // Why the connection broke (OK when it did not).
  const Status& last_error() const { return last_error_; }
  const Endpoint& endpoint() const { return endpoint_; }

  enum class ErrorReplies {
    kFail,  // an error reply becomes a non-OK Status carrying the server's message
    kKeep,  // an error reply is returned as a Reply of type kError with an OK Status
  };
  // One command: argv[0] is its name; arguments are binary-safe. The two-argument form fails
  // on an error reply.
  Status Run(const Argv& argv, Reply* out, ErrorReplies errors);
  Status Run(const Argv& argv, Reply* out) override { return Run(argv, out, ErrorReplies::kFail); }

  // Sends all commands at once, then reads one reply per command. Error replies stay in their
  // Reply (one failed command does not fail the others); the Status is non-OK only when the
  // connection failed, and then `out` is untouched.
  Status Pipeline(const std::vector<Argv>& commands, std::vector<Reply>* out);
  // The same, but on a connection failure `received` holds the replies that did arrive, in
  // order (a prefix of the commands): those commands were executed; about the rest nothing is
  // known. The one exception to "outputs are set only on success", for callers (Outbox) that
  // must not resend what the server accepted.
  Status PipelinePartial(const std::vector<Argv>& commands, std::vector<Reply>* received) override;
  std::string Where() const override;  // "host:port", "[v6]:port"

  // PipelinePartial in two halves, so that one thread can keep pipelines to several servers
  // in flight at once (ClusterClient): PipelineSend writes every command out, PipelineReceive
  // then reads `count` replies into `received` (a prefix on a connection failure, as above).
  Status PipelineSend(const std::vector<Argv>& commands);
  Status PipelineReceive(const std::vector<Argv>& commands, std::vector<Reply>* received);

 private:
  Status RunRaw(const Argv& argv, Reply* out);       // error replies stay replies
  Status Fail(std::string_view doing, int err);      // converts ctx_'s error, closes, marks broken
  Status Handshake(std::chrono::steady_clock::time_point deadline);
  Status HandshakeStep(const Argv& argv, std::chrono::steady_clock::time_point deadline,
                       Reply* out);
  Status SetTimeout(std::chrono::milliseconds timeout);
  Status NotConnected() const;
  // Logs, once per command name, that the server's ACL refused `argv`'s command (an operator
  // must change the user's rules; a loop that ignores the failed read would say nothing).
  void NoteRefusal(const Argv& argv, const Reply& reply);

  redisContext* ctx_ = nullptr;
  Endpoint endpoint_;
  std::chrono::milliseconds io_timeout_{0};
  std::chrono::milliseconds current_timeout_{0};  // the socket's, for messages
  bool broken_ = false;
  Status last_error_;
  std::set<std::string> refusals_logged_;  // command names
};

struct ReconnectPolicy {
  std::chrono::milliseconds connect_timeout{1000};  // the longest one attempt blocks
  std::chrono::milliseconds io_timeout{2000};
  std::chrono::milliseconds initial_backoff{100};   // after the first failed attempt
  std::chrono::milliseconds max_backoff{5000};      // doubling stops here
  uint64_t seed = 0;                                // jitter; 0: from std::random_device
  Subsystem log_subsystem = Subsystem::kCommon;     // whose log lines these are
};

// The wait after `failures` failed attempts in a row: initial_backoff doubled per failure after
// the first, up to max_backoff, shortened by up to 20% at random from `rng` (never longer: the
// cap stays a cap). ReconnectingClient and ClusterClient's masters wait this.
std::chrono::milliseconds ReconnectBackoff(const ReconnectPolicy& policy, int failures,
                                           std::mt19937_64* rng);

// A Client that comes back by itself, for a loop that must never wait on Redis: call
// Ensure(now) each tick; it returns at once unless an attempt is due, and an attempt blocks at
// most policy.connect_timeout. After a failed attempt the next waits 100 ms, doubling to 5 s,
// each delay shortened by up to 20% at random so that a thousand workers do not reconnect in
// lockstep. A connection that breaks is retried at the next Ensure. Not thread-safe.
class ReconnectingClient {
 public:
  using Clock = std::chrono::steady_clock;

  explicit ReconnectingClient(Endpoint endpoint, ReconnectPolicy policy = {});

  // True when client() is connected now (possibly after connecting in this call).
  bool Ensure(Clock::time_point now);

  Client& client() { return client_; }
  bool connected() const { return client_.connected(); }
  const Endpoint& endpoint() const { return endpoint_; }
  const ReconnectPolicy& policy() const { return policy_; }

  // Why the last attempt or connection failed (OK after a success).
  const Status& last_error() const { return last_error_; }
  // Failed attempts since the last success.
  int failures() const { return failures_; }
  // Connection attempts made so far (successful or not).
  uint64_t attempts() const { return attempts_; }
  // Successful connects after the first one.
  uint64_t reconnects() const { return reconnects_; }
  Clock::time_point next_attempt() const { return next_attempt_; }

 private:
  std::chrono::milliseconds Backoff();

  Endpoint endpoint_;
  ReconnectPolicy policy_;
  Client client_;
  std::mt19937_64 rng_;
  Status last_error_;
  int failures_ = 0;
  uint64_t attempts_ = 0;
  uint64_t connects_ = 0;
  uint64_t reconnects_ = 0;
  bool reported_down_ = false;
  Clock::time_point next_attempt_{};  // the epoch: the first Ensure tries at once
};

}  // namespace ft::redis

#endif  // FT_REDIS_CLIENT_H_
