// The Redis ACL users of one job, one per role (docs/redis-schema.md, "Access control"):
//   worker    every ftworker of the job: writes what workers write (events, progress,
//             summaries, membership, heartbeats, acks, command cursors, checkpoint copies,
//             endpoints, prefetch reports), reads what the master publishes (timeouts,
//             commands, the restore plan, the transfer secret, the evicted set); never writes
//             a plan, a timeout table, a command, the secret or the master's state
//   master    ftmaster run (and `ftmaster save`): reads and writes every key of the job
//   operator  the read-only subcommands (status, incidents, timeouts, evicted, checkpoints)
//             and redis-cli: reads every key of the job except the transfer secret, writes
//             nothing
// Each role's commands are the ones its code issues (PING, SELECT, the reads and writes, EVAL
// for the scripts, whose commands Redis checks against the same user) and no others: no KEYS,
// SCAN, CONFIG, FLUSH*, pub/sub. The key patterns use Redis 7's %R/%W selectors.
//
// The rules carry no password and no `reset`: applying them again (a newer ft needing another
// command) keeps the password an operator gave each user (`ACL SETUSER <user> >password`).
// Pure functions: no Redis, no environment.
#ifndef FT_FTMASTER_CLI_ACL_H_
#define FT_FTMASTER_CLI_ACL_H_

#include <string>
#include <string_view>
#include <vector>

namespace ft::master {

enum class AclRole { kWorker, kMaster, kOperator };

// "worker", "master", "operator".
const char* AclRoleName(AclRole role);

struct AclKeyPattern {
  std::string pattern;  // a Redis glob over the key name
  bool read = false;
  bool write = false;
};

struct AclUser {
  AclRole role = AclRole::kWorker;
  std::string name;                   // ft-<job token>-<role> (common/job_name.h)
  std::vector<std::string> commands;  // lower case, each allowed on the keys below
  std::vector<AclKeyPattern> keys;
};

// The three users of `job` (spelled as in its keys: JobToken), worker first.
std::vector<AclUser> AclUsers(std::string_view job);

// The rules of one user in ACL SETUSER / ACL file syntax, without the user's name:
// "on resetchannels resetkeys -@all +ping ... %R~ft:{J}:timeouts ~ft:{J}:events ...".
std::string AclRules(const AclUser& user);

// What `ftmaster acl` prints on stdout: per user either an `ACL SETUSER <name> <rules>` line
// (for redis-cli's stdin) or, with `aclfile`, a `user <name> <rules>` line for a Redis ACL
// file (append `>password` or `#<sha256>` to each). Nothing else: neither redis-cli nor an
// ACL file accepts a comment line.
std::string AclText(std::string_view job, bool aclfile);
// What it prints on stderr: the roles, and how to apply the lines and give passwords.
std::string AclGuide(std::string_view job, bool aclfile);

// Whether `user` may run `command` (any case) on `key`, reading (`write` false) or writing:
// the rules evaluated as Redis evaluates them (glob patterns, %R/%W), for tests.
bool AclAllows(const AclUser& user, std::string_view command, std::string_view key, bool write);

// Redis's glob (stringmatch): *, ?, [...] with ranges and ^, backslash escapes.
bool RedisGlobMatch(std::string_view pattern, std::string_view text);

}  // namespace ft::master

#endif  // FT_FTMASTER_CLI_ACL_H_
