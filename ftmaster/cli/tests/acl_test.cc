// The job's Redis ACL users (ftmaster/cli/acl.h): which role may read and write which key of the
// job, with which commands, evaluated the way Redis evaluates the printed rules.
#include "ftmaster/cli/acl.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/job_name.h"
#include "proto/keys.h"

namespace ft::master {
namespace {

const AclUser& User(const std::vector<AclUser>& users, AclRole role) {
  for (const AclUser& u : users) {
    if (u.role == role) return u;
  }
  ADD_FAILURE() << "no " << AclRoleName(role) << " user";
  return users.front();
}

bool CanRead(const AclUser& u, const std::string& key) { return AclAllows(u, "GET", key, false); }
bool CanWrite(const AclUser& u, const std::string& key) { return AclAllows(u, "SET", key, true); }

TEST(AclGlob, MatchesAsRedisDoes) {
  EXPECT_TRUE(RedisGlobMatch("ft:{j}:*", "ft:{j}:events"));
  EXPECT_FALSE(RedisGlobMatch("ft:{j}:*", "ft:{j2}:events"));
  EXPECT_TRUE(RedisGlobMatch("ft:{j}:ckpt:[0-9]*", "ft:{j}:ckpt:120"));
  EXPECT_FALSE(RedisGlobMatch("ft:{j}:ckpt:[0-9]*", "ft:{j}:ckpt:verdicts"));
  EXPECT_FALSE(RedisGlobMatch("ft:{j}:ckpt:[0-9]*", "ft:{j}:ckpt:steps"));
  EXPECT_TRUE(RedisGlobMatch("ft:{j}:cmd:*:cursor", "ft:{j}:cmd:node1:cursor"));
  EXPECT_FALSE(RedisGlobMatch("ft:{j}:cmd:*:cursor", "ft:{j}:cmd:node1"));
  EXPECT_TRUE(RedisGlobMatch("a?c", "abc"));
  EXPECT_TRUE(RedisGlobMatch("a[^x]c", "abc"));
  EXPECT_FALSE(RedisGlobMatch("a[^b]c", "abc"));
  EXPECT_TRUE(RedisGlobMatch("a\\*", "a*"));
  EXPECT_FALSE(RedisGlobMatch("a\\*", "ab"));
  EXPECT_FALSE(RedisGlobMatch("abc", "ab"));
}

TEST(AclUsers, NamedPerJobAndRole) {
  std::vector<AclUser> users = AclUsers("llama-7b");
  ASSERT_EQ(users.size(), 3u);
  EXPECT_EQ(User(users, AclRole::kWorker).name, "ft-llama-7b-worker");
  EXPECT_EQ(User(users, AclRole::kMaster).name, "ft-llama-7b-master");
  EXPECT_EQ(User(users, AclRole::kOperator).name, "ft-llama-7b-operator");
  // A name its keys spell differently: the users spell it the same way, and their patterns
  // are the keys' (no byte of the name reaches a pattern as a glob character).
  users = AclUsers("exp.1/[a]*");
  const std::string token = JobToken("exp.1/[a]*");
  EXPECT_EQ(User(users, AclRole::kWorker).name, "ft-" + token + "-worker");
  const AclUser& master = User(users, AclRole::kMaster);
  ASSERT_EQ(master.keys.size(), 5u);  // the job's two tags, and the nodes across jobs (NodesAcrossJobs)
  EXPECT_EQ(master.keys[0].pattern, proto::Keys("exp.1/[a]*").prefix() + "*");
  EXPECT_EQ(master.keys[1].pattern, proto::Keys("exp.1/[a]*").AllGroups("*"));
  EXPECT_TRUE(AclAllows(master, "GET", proto::Keys("exp.1/[a]*").Restore(), false));
  EXPECT_FALSE(AclAllows(master, "GET", proto::Keys("exp.1/[b]*").Restore(), false));
  // The job's groups (proto/keys.h), and no other job's.
  EXPECT_TRUE(AclAllows(master, "HGET", proto::Keys("exp.1/[a]*").ProgressOf(9), false));
  EXPECT_TRUE(AclAllows(master, "GET", proto::Keys("exp.1/[a]*").WorkerHeartbeat("n"), false));
  EXPECT_FALSE(AclAllows(master, "HGET", proto::Keys("exp.1/[b]*").ProgressOf(9), false));
}

TEST(AclUsers, WorkerWritesWhatWorkersWriteAndReadsWhatTheMasterPublishes) {
  std::vector<AclUser> users = AclUsers("j");
  const AclUser& w = User(users, AclRole::kWorker);
  proto::Keys k("j");
  for (const std::string& key :
       {k.Events(), k.Acks(), k.Progress(0), k.Summaries(0), k.ProgressOf(31), k.SummaryOf(31),
        k.Ranks(), k.RanksVersion(),
        k.Workers(), k.WorkerHeartbeat("node7"), k.CommandCursor("node7"), k.CkptSteps(),
        k.CkptStep(0), k.CkptStep(123456), k.Endpoints(), k.Prefetch()}) {
    EXPECT_TRUE(CanWrite(w, key)) << key;
    EXPECT_TRUE(CanRead(w, key)) << key;
  }
  for (const std::string& key : {k.Timeouts(), k.TimeoutsVersion(), k.Commands("node7"),
                                 k.Restore(), k.RestoreVersion(), k.TransferSecret(),
                                 k.Evicted(), k.MasterState(), k.CkptVerdicts()}) {
    EXPECT_TRUE(CanRead(w, key)) << key;
    EXPECT_FALSE(CanWrite(w, key)) << key << ": only the master writes it";
  }
  for (const std::string& key : {k.Incidents(), k.Leader(), k.MasterState(), k.CkptVerdicts()}) {
    EXPECT_FALSE(CanWrite(w, key)) << key;
  }
  // Another job's groups are not this job's (a JobToken has no ':').
  for (const std::string& key : {proto::Keys("j2").ProgressOf(3), proto::Keys("j2").SummaryOf(3),
                                 proto::Keys("j2").WorkerHeartbeat("node7"),
                                 proto::Keys("j2").CommandCursor("node7")}) {
    EXPECT_FALSE(CanRead(w, key)) << key;
  }
  EXPECT_FALSE(CanWrite(w, k.CkptVerdicts()));
  // Another job's keys: nothing, not even its secret or its plan.
  proto::Keys other("j2");
  EXPECT_FALSE(CanRead(w, other.TransferSecret()));
  EXPECT_FALSE(CanRead(w, other.Restore()));
  EXPECT_FALSE(CanWrite(w, other.Events()));
  EXPECT_FALSE(CanRead(w, "ft:{j}"));
  // What the worker's code sends, and nothing that reaches beyond the job's keys.
  for (const char* c : {"PING", "GET", "SET", "INCR", "HSET", "HMGET", "HGETALL", "HDEL", "SADD",
                        "XADD", "XRANGE", "EVAL", "ZADD", "ZREM", "HLEN", "SMEMBERS"}) {
    EXPECT_TRUE(AclAllows(w, c, k.Events(), true)) << c;
  }
  for (const char* c : {"KEYS", "SCAN", "FLUSHALL", "CONFIG", "DEL", "EVALSHA", "PUBLISH"}) {
    EXPECT_FALSE(AclAllows(w, c, k.Events(), true)) << c;
  }
}

TEST(AclUsers, MasterOwnsEveryKeyOfItsJobOnly) {
  std::vector<AclUser> users = AclUsers("j");
  const AclUser& m = User(users, AclRole::kMaster);
  proto::Keys k("j");
  for (const std::string& key : {k.Restore(), k.RestoreVersion(), k.Timeouts(), k.Commands("n"),
                                 k.Incidents(), k.Evicted(), k.Leader(), k.MasterState(),
                                 k.CkptVerdicts(), k.TransferSecret(), k.Events(), k.Ranks()}) {
    EXPECT_TRUE(CanWrite(m, key)) << key;
    EXPECT_TRUE(CanRead(m, key)) << key;
  }
  EXPECT_FALSE(CanRead(m, proto::Keys("j2").Restore()));
  for (const char* c : {"EVAL", "HSETNX", "PEXPIRE", "DEL", "STRLEN", "HSCAN", "ZSCORE", "XREVRANGE",
                        "EXISTS", "XLEN", "SCARD"}) {
    EXPECT_TRUE(AclAllows(m, c, k.MasterState(), true)) << c;
  }
  for (const char* c : {"KEYS", "SCAN", "FLUSHALL", "FLUSHDB", "CONFIG", "SHUTDOWN"}) {
    EXPECT_FALSE(AclAllows(m, c, k.MasterState(), true)) << c;
  }
}

TEST(AclUsers, OperatorReadsEverythingButTheSecretAndWritesNothing) {
  std::vector<AclUser> users = AclUsers("j");
  const AclUser& o = User(users, AclRole::kOperator);
  proto::Keys k("j");
  for (const std::string& key :
       {k.Events(), k.Progress(0), k.Summaries(15), k.ProgressOf(7), k.Ranks(), k.RanksVersion(), k.Workers(),
        k.WorkerHeartbeat("n"), k.Timeouts(), k.TimeoutsVersion(), k.Commands("n"),
        k.CommandCursor("n"), k.Acks(), k.Incidents(), k.Evicted(), k.Leader(), k.MasterState(),
        k.CkptSteps(), k.CkptStep(5), k.CkptVerdicts(), k.Restore(), k.RestoreVersion(),
        k.Endpoints(), k.Prefetch()}) {
    EXPECT_TRUE(CanRead(o, key)) << key;
    EXPECT_FALSE(CanWrite(o, key)) << key;
  }
  EXPECT_FALSE(CanRead(o, k.TransferSecret())) << "reading it is reading every checkpoint";
  EXPECT_FALSE(AclAllows(o, "STRLEN", k.TransferSecret(), false));
  EXPECT_FALSE(CanRead(o, proto::Keys("j2").Events()));
  for (const char* c : {"SET", "HSET", "XADD", "DEL", "EVAL", "KEYS", "SCAN"}) {
    EXPECT_FALSE(AclAllows(o, c, k.Events(), false)) << c;
  }
}

TEST(AclUsers, NodesAcrossJobs) {
  std::vector<AclUser> users = AclUsers("j");
  const AclUser& w = User(users, AclRole::kWorker);
  const AclUser& m = User(users, AclRole::kMaster);
  const AclUser& o = User(users, AclRole::kOperator);
  const std::string history = proto::Keys::NodeHistory("gpu-017");
  // The leader appends each incident to its nodes' histories and keeps the index bounded.
  for (const char* c : {"XADD", "PEXPIRE", "XREVRANGE"}) EXPECT_TRUE(AclAllows(m, c, history, true)) << c;
  for (const char* c : {"ZADD", "ZREMRANGEBYRANK", "PEXPIRE"}) {
    EXPECT_TRUE(AclAllows(m, c, proto::Keys::NodesIndex(), true)) << c;
  }
  // It reads the cordons into its own eviction list (SREM: a lifted one leaves it); writing a
  // cordon is an administrator's act.
  EXPECT_TRUE(AclAllows(m, "HGETALL", proto::Keys::Cordons(), false));
  EXPECT_FALSE(AclAllows(m, "HSET", proto::Keys::Cordons(), true));
  EXPECT_TRUE(AclAllows(m, "SREM", proto::Keys("j").Evicted(), true));
  // Operators read all three (ftmaster nodes) and write none.
  for (const auto& [c, key] : std::vector<std::pair<const char*, std::string>>{
           {"XREVRANGE", history}, {"ZREVRANGE", proto::Keys::NodesIndex()}, {"HGETALL", proto::Keys::Cordons()}}) {
    EXPECT_TRUE(AclAllows(o, c, key, false)) << c;
  }
  for (const std::string& key : {history, proto::Keys::NodesIndex(), proto::Keys::Cordons()}) {
    EXPECT_FALSE(CanWrite(o, key)) << key;
    EXPECT_FALSE(CanRead(w, key)) << key << ": workers need nothing across jobs";
  }
  // The pattern names histories only, not another job's keys.
  EXPECT_FALSE(CanRead(m, "ft:node:{x}:other"));
  EXPECT_FALSE(CanRead(m, proto::Keys("j2").MasterState()));
}

TEST(AclText, SetUserLinesCarryTheRulesAndNoPassword) {
  std::string text = AclText("j", false);
  std::vector<AclUser> users = AclUsers("j");
  for (const AclUser& u : users) {
    std::string line = "ACL SETUSER " + u.name + " " + AclRules(u) + "\n";
    EXPECT_NE(text.find(line), std::string::npos) << u.name << "\n" << text;
  }
  const std::string worker = AclRules(User(users, AclRole::kWorker));
  EXPECT_EQ(worker.rfind("on resetchannels resetkeys -@all +ping ", 0), 0u) << worker;
  EXPECT_NE(worker.find(" %R~ft:{j}:restore "), std::string::npos) << worker;
  EXPECT_NE(worker.find(" ~ft:{j}:events "), std::string::npos) << worker;
  EXPECT_NE(worker.find(" ~ft:{j}:ckpt:[0-9]* "), std::string::npos) << worker;
  // No password and no reset: applying the lines again keeps the passwords set.
  for (const AclUser& u : users) {
    std::string rules = AclRules(u);
    for (const char* forbidden : {">", "#", "nopass", "resetpass", " reset ", "allkeys", "~*",
                                  "+@all", "allcommands"}) {
      EXPECT_EQ(rules.find(forbidden), std::string::npos) << forbidden << " in " << rules;
    }
  }
}

TEST(AclText, AclFileLinesForEachUser) {
  std::string text = AclText("j", true);
  for (const AclUser& u : AclUsers("j")) {
    EXPECT_NE(text.find("user " + u.name + " " + AclRules(u) + "\n"), std::string::npos) << text;
  }
  EXPECT_EQ(text.find("ACL SETUSER"), std::string::npos);
}

TEST(AclText, NothingButOneLinePerUser) {
  // Neither redis-cli (reading commands from stdin) nor a Redis ACL file accepts a comment.
  for (bool aclfile : {false, true}) {
    std::string text = AclText("j", aclfile);
    int lines = 0;
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      ASSERT_NE(end, std::string::npos) << "the last line ends with a newline";
      std::string line = text.substr(start, end - start);
      EXPECT_EQ(line.rfind(aclfile ? "user ft-j-" : "ACL SETUSER ft-j-", 0), 0u) << line;
      ++lines;
      start = end + 1;
    }
    EXPECT_EQ(lines, 3);
    EXPECT_NE(AclGuide("j", aclfile).find("FT_REDIS_USER"), std::string::npos);
  }
}

}  // namespace
}  // namespace ft::master
