// An in-memory Redis for unit tests of the loops that talk to Redis (ftmaster's MasterLoop,
// ftworker's Daemon): deterministic, no server, no wall clock.
//
//   FakeRedis — the server: the data and its clock (unix ms, set by the test; TTLs and stream
//               ids follow it). Speaks the plain commands listed in store.h with Redis's
//               replies and errors (WRONGTYPE, unknown command; keyspace.h, commands.cc), and
//               runs the Store's atomic operations as single steps. FlushAll() loses everything, as a restarted Redis
//               without persistence does.
//   FakeStore — one client connection to a FakeRedis (two master loops on one FakeRedis are
//               two FakeStores), with faults injected on it:
//                 FailAfter(n)          the (n+1)-th command from now breaks the connection
//                                       (kUnavailable, not executed); the next Ensure reconnects
//                 FailCommand(name, s)  every command or operation so named fails with s,
//                                       unexecuted (names: "HGETALL", "XADD", ..., and the
//                                       operations "RENEW", "DELETE_IF_HELD", "FENCED",
//                                       "GATED_APPEND")
//                 Drop() / Restore()    the connection breaks and Ensure fails until Restore
// Not thread-safe.
#ifndef FT_REDIS_FAKE_FAKE_STORE_H_
#define FT_REDIS_FAKE_FAKE_STORE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "redis/fake/keyspace.h"
#include "redis/store.h"

namespace ft::redis {

class FakeRedis {
 public:
  using StreamEntry = fake::StreamEntry;

  void SetUnixMs(int64_t unix_ms) { keys_.unix_ms = unix_ms; }
  void AdvanceMs(int64_t ms) { keys_.unix_ms += ms; }
  int64_t unix_ms() const { return keys_.unix_ms; }

  // Every key gone (FLUSHALL, or a restart without persistence).
  void FlushAll() { keys_.Clear(); }

  // One plain command; an error is an error Reply ("WRONGTYPE ...", "ERR ...").
  Reply Execute(const Argv& argv);

  // The atomic operations of Store (fault-free; FakeStore adds the faults).
  Reply RenewIfHeld(const std::string& key, const std::string& value, int64_t ms, bool* held);
  Reply DeleteIfHeld(const std::string& key, const std::string& value, bool* held);
  Reply FencedRun(const Fence& fence, const std::vector<Argv>& commands, bool* held);
  Reply FencedGatedAppend(const Fence& fence, const GatedAppend& append, std::vector<bool>* won,
                          bool* held);

  // For assertions.
  std::optional<std::string> Get(const std::string& key);
  std::optional<std::string> HGet(const std::string& key, const std::string& field);
  std::map<std::string, std::string> HGetAll(const std::string& key);
  std::set<std::string> Members(const std::string& key);
  std::vector<StreamEntry> Stream(const std::string& key);
  bool Exists(const std::string& key);
  uint64_t executed() const { return executed_; }

 private:
  fake::Keyspace keys_;
  uint64_t executed_ = 0;
};

class FakeStore : public Store {
 public:
  explicit FakeStore(FakeRedis* server, std::string name = "fake");

  // Faults.
  void FailAfter(int n) { fail_after_ = n; }
  void FailCommand(std::string name, Status status) { failing_[std::move(name)] = std::move(status); }
  // The next `name` command is answered `delay` late, in real time (a slow reply, or a caller
  // descheduled while it waited): once.
  void DelayOnce(std::string name, std::chrono::milliseconds delay) { delays_[std::move(name)] = delay; }
  void ClearFaults();
  void Drop();
  void Restore() { down_ = false; }

  uint64_t commands() const { return commands_; }  // reached the server
  uint64_t connects() const { return connects_; }
  FakeRedis* server() { return server_; }

  bool connected() const override { return connected_; }
  Status Run(const Argv& argv, Reply* out) override;
  Status PipelinePartial(const std::vector<Argv>& commands, std::vector<Reply>* received) override;
  std::string Where() const override { return name_; }

  bool Ensure(Clock::time_point now) override;
  Status RenewIfHeld(const std::string& key, const std::string& value, int64_t ms,
                     bool* held) override;
  Status DeleteIfHeld(const std::string& key, const std::string& value, bool* held) override;
  Status FencedRun(const Fence& fence, const std::vector<Argv>& commands, bool* held) override;
  Status FencedGatedAppend(const Fence& fence, const GatedAppend& append, std::vector<bool>* won,
                           bool* held) override;

 private:
  // The faults for one command or operation: OK to go ahead.
  Status Admit(const std::string& name);
  Status Result(const std::string& name, const Reply& reply);

  FakeRedis* server_;
  std::string name_;
  bool connected_ = false;
  bool down_ = false;
  int fail_after_ = -1;
  std::map<std::string, Status> failing_;
  std::map<std::string, std::chrono::milliseconds> delays_;
  uint64_t commands_ = 0;
  uint64_t connects_ = 0;
};

}  // namespace ft::redis

#endif  // FT_REDIS_FAKE_FAKE_STORE_H_
