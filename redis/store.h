// What ftmaster's loop and ftworker's daemon need from Redis, behind two small interfaces so
// that both loops are tested by driving Tick(now) against an in-memory fake with injected
// faults (redis/fake/fake_store.h), with no redis-server and no wall clock:
//
//   Commands — plain commands on one connection: Run one, or pipeline several (Outbox).
//   Store    — Commands plus (re)connecting on the caller's clock and the few operations that
//              must be atomic on the server. The real store (RedisStore) runs each atomic
//              operation as one Lua script; the fake runs it as one step of its own. They are
//              interface operations, not scripts the fake would have to interpret: what a
//              caller relies on is the operation's meaning (compare-and-renew, fenced
//              writes, a gate won once), and store_contract_test runs the same cases against
//              both stores to show that they agree.
//
// Plain commands the two loops use (and the fake speaks): GET, SET [NX] [PX|EX], DEL, HGET,
// HSET, HSETNX, HDEL, HGETALL, HMGET, HSCAN [COUNT n] (the fake's cursor: a field index),
// INCR, SADD, SREM, SMEMBERS, XADD [MAXLEN ~ n] *, XRANGE, XREVRANGE, ZADD, ZREMRANGEBYRANK.
// Not thread-safe: one thread owns each object.
#ifndef FT_REDIS_STORE_H_
#define FT_REDIS_STORE_H_

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"
#include "redis/reply.h"

namespace ft::redis {

using Argv = std::vector<std::string>;  // one command: its name, then its arguments

class Commands {
 public:
  virtual ~Commands() = default;

  virtual bool connected() const = 0;
  // One command; an error reply becomes a non-OK Status with the server's message.
  virtual Status Run(const Argv& argv, Reply* out) = 0;
  // Sends all commands, reads one reply per command. On a connection failure `received`
  // holds the replies that did arrive (a prefix: those commands were executed) and the
  // Status is non-OK. Error replies stay in their Reply.
  virtual Status PipelinePartial(const std::vector<Argv>& commands, std::vector<Reply>* received) = 0;
  // "host:port" without the password, for messages.
  virtual std::string Where() const = 0;
};

// The compare value of a fenced write: the writes happen only while `key` holds `value`.
struct Fence {
  std::string key;    // the leader lease key
  std::string value;  // this writer's id
};

// The exactly-once append: per entry, `HSETNX gate_hash <gate> <gate_value>` decides; only the
// winner appends `fields` to `stream` (XADD MAXLEN ~ stream_cap *). If that XADD fails, the
// gate is taken back (a refused write is retried, never lost) and the operation fails. On any
// win the `on_any_win` commands run too; the `always` commands run either way, after them.
struct GatedAppend {
  struct Entry {
    std::string gate;  // hash field, e.g. "decided:<incident id>"
    Argv fields;       // field, value, ...
  };
  std::string gate_hash;
  std::string gate_value;
  std::string stream;
  std::string stream_cap;
  std::vector<Entry> entries;
  std::vector<Argv> on_any_win;
  std::vector<Argv> always;
};

class Store : public Commands {
 public:
  using Clock = std::chrono::steady_clock;

  // Connects when not connected and an attempt is due (with backoff); true when usable now.
  virtual bool Ensure(Clock::time_point now) = 0;

  // PEXPIRE key ms / DEL key, only while `key` holds `value`. *held: it did (and was renewed
  // or deleted).
  virtual Status RenewIfHeld(const std::string& key, const std::string& value, int64_t ms,
                             bool* held) = 0;
  virtual Status DeleteIfHeld(const std::string& key, const std::string& value, bool* held) = 0;
  // Runs `commands` atomically, all of them, only while the fence holds. *held false: none ran.
  virtual Status FencedRun(const Fence& fence, const std::vector<Argv>& commands, bool* held) = 0;
  // GatedAppend under the fence, atomically. *won: per entry, whether this call won its gate
  // (left empty when the fence did not hold).
  virtual Status FencedGatedAppend(const Fence& fence, const GatedAppend& append,
                                   std::vector<bool>* won, bool* held) = 0;
};

}  // namespace ft::redis

#endif  // FT_REDIS_STORE_H_
