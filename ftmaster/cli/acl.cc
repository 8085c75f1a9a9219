#include "ftmaster/cli/acl.h"

#include <algorithm>
#include <cctype>

#include "common/job_name.h"
#include "common/names.h"
#include "proto/keys.h"

namespace ft::master {
namespace {

// What each role's code sends (docs/redis-schema.md, "Access control", lists them with the
// code that sends each). PING and SELECT: the connection's handshake (SELECT only with a /db
// in FT_REDIS). EVAL: the Lua scripts (the lease, fenced writes, a checkpoint copy and its
// step in one step); Redis checks the commands a script runs against the same user.
// CLUSTER SLOTS and ASKING: a client of a Redis Cluster (redis/cluster.h) loads the slot map
// and follows a migrating slot; a single server never sees them.
const std::vector<std::string>& WorkerCommands() {
  static const std::vector<std::string> kCommands = {
      "ping",  "select", "get",  "set",  "incr", "hget", "hgetall", "hmget", "hset",
      "hdel",  "hlen",   "sadd", "smembers", "xadd", "xrange", "xrevrange", "xread", "zadd",
      "zrem",  "eval",   "cluster|slots", "asking"};
  return kCommands;
}

const std::vector<std::string>& MasterCommands() {
  static const std::vector<std::string> kCommands = {
      "ping",  "select", "get",    "set",     "strlen",   "exists", "hget",  "hgetall",
      "hmget", "hlen",   "hscan",  "hset",    "hsetnx",   "hdel",   "sadd",  "scard",
      "smembers", "xadd", "xlen",  "xrange",  "xrevrange", "zrevrange", "zscore", "pexpire",
      "del",   "eval", "cluster|slots", "asking",
      // Nodes across jobs (node_history.h, cordon_round.h): the index's bound; a lifted cordon
      // leaves the job's eviction list.
      "zadd", "zremrangebyrank", "srem"};
  return kCommands;
}

// The read-only subcommands' reads, and what a person following a job with redis-cli asks
// (docs/redis-schema.md, "Following a job by hand"). No KEYS or SCAN: they would list every
// job's key names.
const std::vector<std::string>& OperatorCommands() {
  static const std::vector<std::string> kCommands = {
      "ping",  "select", "get",   "strlen", "exists", "type",     "ttl",   "pttl",
      "hget",  "hgetall", "hmget", "hlen",  "hkeys",  "hscan",    "scard", "smembers",
      "sismember", "xlen", "xrange", "xrevrange", "zcard", "zrange", "zrevrange", "zscore",
      "cluster|slots", "asking"};
  return kCommands;
}

AclKeyPattern Read(std::string pattern) { return {std::move(pattern), true, false}; }
AclKeyPattern ReadWrite(std::string pattern) { return {std::move(pattern), true, true}; }

std::vector<AclKeyPattern> WorkerKeys(const proto::Keys& k) {
  const std::string& p = k.prefix();
  return {
      // Published by the master, read by every worker.
      Read(k.Timeouts()), Read(k.TimeoutsVersion()), Read(p + "cmd:*"), Read(k.Restore()),
      // Its node's command cursor, beside the stream (node names hold no ':').
      ReadWrite(p + "cmd:*:cursor"),
      Read(k.RestoreVersion()), Read(k.TransferSecret()), Read(k.Evicted()), Read(k.Notify()),
      // What the arena pass asks: whether the job finished, and the steps' verdicts.
      Read(k.MasterState()), Read(k.CkptVerdicts()),
      // Written by workers (and read back: a worker re-asserts what Redis lost).
      ReadWrite(k.Events()), ReadWrite(k.Acks()), ReadWrite(k.AllGroups("progress")),
      ReadWrite(k.AllGroups("summary")), ReadWrite(k.Ranks()), ReadWrite(k.RanksVersion()),
      ReadWrite(k.Workers()), ReadWrite(k.AllGroups("worker:*")),
      Read(k.AllGroups("cursor:*")),  // the grouped layout's cursor: read once after an upgrade
      ReadWrite(k.CkptSteps()), ReadWrite(p + "ckpt:[0-9]*"), ReadWrite(k.Endpoints()),
      ReadWrite(k.Prefetch())};
}

// Nodes across jobs (docs/nodes.md): keys of no job's slot. The master appends to the nodes'
// histories and their index and reads the cordons; an operator reads all three. Writing a
// cordon (`ftmaster nodes --cordon`) is an administrator's act: none of the job's users may.
std::vector<AclKeyPattern> NodeKeys(bool master) {
  const std::string history = "ft:node:{*}:history";
  if (master) return {ReadWrite(history), ReadWrite(proto::Keys::NodesIndex()), Read(proto::Keys::Cordons())};
  return {Read(history), Read(proto::Keys::NodesIndex()), Read(proto::Keys::Cordons())};
}

std::vector<AclKeyPattern> OperatorKeys(const proto::Keys& k) {
  const std::string& p = k.prefix();
  // Every key of the job but the transfer secret (ACL patterns cannot exclude one, so each
  // is named).
  return {Read(k.Events()),   Read(k.AllGroups("progress")), Read(k.AllGroups("summary")),
          Read(k.Ranks()),    Read(k.RanksVersion()), Read(k.Workers()),
          Read(k.AllGroups("worker:*")), Read(k.AllGroups("cursor:*")), Read(k.Timeouts()),
          Read(k.TimeoutsVersion()),
          Read(p + "cmd:*"),  Read(k.Acks()),       Read(k.Incidents()),
          Read(k.Evicted()),  Read(k.Leader()),     Read(k.MasterState()),
          Read(p + "ckpt:*"), Read(k.Restore()),    Read(k.RestoreVersion()),
          Read(k.Endpoints()), Read(k.Prefetch()), Read(k.Notify()),
          // Nodes across jobs: `ftmaster nodes`.
          NodeKeys(false)[0], NodeKeys(false)[1], NodeKeys(false)[2]};
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Redis's stringmatchlen, without nocase.
bool GlobMatch(const char* p, size_t plen, const char* s, size_t slen) {
  while (plen > 0 && slen > 0) {
    switch (p[0]) {
      case '*': {
        while (plen > 1 && p[1] == '*') {
          ++p;
          --plen;
        }
        if (plen == 1) return true;
        for (size_t i = 0; i <= slen; ++i) {
          if (GlobMatch(p + 1, plen - 1, s + i, slen - i)) return true;
        }
        return false;
      }
      case '?':
        ++s;
        --slen;
        break;
      case '[': {
        ++p;
        --plen;
        bool negate = plen > 0 && p[0] == '^';
        if (negate) {
          ++p;
          --plen;
        }
        bool match = false;
        while (plen > 0 && p[0] != ']') {
          if (p[0] == '\\' && plen >= 2) {
            ++p;
            --plen;
            if (p[0] == s[0]) match = true;
          } else if (plen >= 3 && p[1] == '-') {
            char lo = p[0], hi = p[2];
            if (lo > hi) std::swap(lo, hi);
            if (s[0] >= lo && s[0] <= hi) match = true;
            p += 2;
            plen -= 2;
          } else if (p[0] == s[0]) {
            match = true;
          }
          ++p;
          --plen;
        }
        if (negate) match = !match;
        if (!match) return false;
        ++s;
        --slen;
        break;
      }
      case '\\':
        if (plen >= 2) {
          ++p;
          --plen;
        }
        [[fallthrough]];
      default:
        if (p[0] != s[0]) return false;
        ++s;
        --slen;
        break;
    }
    ++p;
    --plen;
  }
  while (plen > 0 && p[0] == '*') {
    ++p;
    --plen;
  }
  return plen == 0 && slen == 0;
}

constexpr Named<AclRole> kAclRoleNames[] = {
    {AclRole::kWorker, "worker"}, {AclRole::kMaster, "master"}, {AclRole::kOperator, "operator"}};
static_assert(NamesAreUnique(kAclRoleNames));
}  // namespace

const char* AclRoleName(AclRole role) { return NameIn(kAclRoleNames, role); }

std::vector<AclUser> AclUsers(std::string_view job) {
  proto::Keys keys(job);
  const std::string base = "ft-" + JobToken(job) + "-";
  std::vector<AclUser> users(3);
  users[0] = {AclRole::kWorker, base + "worker", WorkerCommands(), WorkerKeys(keys)};
  std::vector<AclKeyPattern> master_keys = {ReadWrite(keys.prefix() + "*"), ReadWrite(keys.AllGroups("*"))};
  for (AclKeyPattern& k : NodeKeys(true)) master_keys.push_back(std::move(k));
  users[1] = {AclRole::kMaster, base + "master", MasterCommands(), std::move(master_keys)};
  users[2] = {AclRole::kOperator, base + "operator", OperatorCommands(), OperatorKeys(keys)};
  return users;
}

std::string AclRules(const AclUser& user) {
  std::string out = "on resetchannels resetkeys -@all";
  for (const std::string& c : user.commands) out += " +" + c;
  for (const AclKeyPattern& k : user.keys) {
    out += ' ';
    if (k.read && k.write) {
      out += "~";
    } else if (k.read) {
      out += "%R~";
    } else {
      out += "%W~";
    }
    out += k.pattern;
  }
  return out;
}

std::string AclText(std::string_view job, bool aclfile) {
  std::string out;
  for (const AclUser& u : AclUsers(job)) {
    out += aclfile ? "user " : "ACL SETUSER ";
    out += u.name + " " + AclRules(u) + "\n";
  }
  return out;
}

std::string AclGuide(std::string_view job, bool aclfile) {
  const std::string name(job);
  std::string out =
      "ftmaster: the Redis ACL users of job " + name + " (Redis 7; docs/redis-schema.md, \"Access "
      "control\"): worker (every ftworker), master (ftmaster run and save), operator (the "
      "read-only subcommands and redis-cli; never the transfer secret).\n";
  if (aclfile) {
    out += "ftmaster: append >PASSWORD (or #<sha256 hex>) to each user's line, and add "
           "\"user default off\" to the file.\n";
  } else {
    out += "ftmaster: apply with: ftmaster acl --job " + name +
           " | redis-cli --user <admin> --askpass; then give each user a password once: ACL "
           "SETUSER <user> >PASSWORD (applying the rules again keeps it).\n";
  }
  out += "ftmaster: `ftmaster nodes --cordon/--uncordon` writes ft:cordon, ft:nodes and ft:node:{*}:history, "
         "keys of every job: run it as an administrator (no job's user may write them).\n";
  out += "ftmaster: each program then runs with FT_REDIS_USER=<user> and "
         "FT_REDIS_PASSWORD=<its password>.\n";
  return out;
}

bool AclAllows(const AclUser& user, std::string_view command, std::string_view key, bool write) {
  const std::string c = Lower(command);
  if (std::find(user.commands.begin(), user.commands.end(), c) == user.commands.end()) {
    return false;
  }
  for (const AclKeyPattern& k : user.keys) {
    if ((write ? k.write : k.read) && RedisGlobMatch(k.pattern, key)) return true;
  }
  return false;
}

bool RedisGlobMatch(std::string_view pattern, std::string_view text) {
  return GlobMatch(pattern.data(), pattern.size(), text.data(), text.size());
}

}  // namespace ft::master
