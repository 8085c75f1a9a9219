// Client and ReconnectingClient against a real redis-server on loopback.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "redis/client.h"
#include "redis/tests/redis_test.h"

namespace ft::redis {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::RedisServer;
using testing::RedisServerOptions;

class ClientE2eTest : public testing::RedisServerTest {};

TEST_F(ClientE2eTest, ConnectsWithPasswordAndRunsCommands) {
  Client c;
  Status s = c.Connect(server_.endpoint(), 1000ms);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(c.connected());
  Reply r;
  ASSERT_TRUE(c.Run({"PING"}, &r).ok());
  EXPECT_TRUE(r.is_status());
  EXPECT_TRUE(r.Is("PONG"));

  std::string binary("a\0b\r\n", 5);
  ASSERT_TRUE(c.Run({"SET", "k", binary}, &r).ok());
  EXPECT_TRUE(r.Is("OK"));
  ASSERT_TRUE(c.Run({"GET", "k"}, &r).ok());
  EXPECT_TRUE(r.is_string());
  EXPECT_EQ(r.str(), binary);
  ASSERT_TRUE(c.Run({"GET", "missing"}, &r).ok());
  EXPECT_TRUE(r.is_nil());
  ASSERT_TRUE(c.Run({"INCRBY", "n", "41"}, &r).ok());
  EXPECT_EQ(r.integer(), 41);
  ASSERT_TRUE(c.Run({"RPUSH", "l", "x", "y"}, &r).ok());
  ASSERT_TRUE(c.Run({"LRANGE", "l", "0", "-1"}, &r).ok());
  EXPECT_EQ(r, Reply::Array({Reply::String("x"), Reply::String("y")}));
}

TEST_F(ClientE2eTest, ErrorRepliesBecomeStatusUnlessKept) {
  Client c;
  ASSERT_TRUE(c.Connect(server_.endpoint(), 1000ms).ok());
  Reply r = Reply::Integer(5);
  ASSERT_TRUE(c.Run({"SET", "k", "v"}, &r).ok());
  r = Reply::Integer(5);
  Status s = c.Run({"HSET", "k", "f", "v"}, &r);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("WRONGTYPE"), std::string_view::npos) << s.message();
  EXPECT_NE(s.message().find("HSET"), std::string_view::npos) << s.message();
  EXPECT_EQ(r, Reply::Integer(5)) << "output set on failure";
  ASSERT_TRUE(c.Run({"HSET", "k", "f", "v"}, &r, Client::ErrorReplies::kKeep).ok());
  EXPECT_TRUE(r.is_error());
  EXPECT_TRUE(c.connected()) << "an error reply does not break the connection";
}

TEST_F(ClientE2eTest, PipelineKeepsOrderAndPerCommandErrors) {
  Client c;
  ASSERT_TRUE(c.Connect(server_.endpoint(), 1000ms).ok());
  std::vector<Argv> cmds;
  for (int i = 0; i < 500; ++i) cmds.push_back({"INCR", "counter"});
  cmds.insert(cmds.begin() + 250, Argv{"NOSUCHCOMMAND", "x"});
  std::vector<Reply> replies;
  Status s = c.Pipeline(cmds, &replies);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(replies.size(), 501u);
  EXPECT_EQ(replies[0].integer(), 1);
  EXPECT_TRUE(replies[250].is_error());
  EXPECT_EQ(replies[251].integer(), 251);
  EXPECT_EQ(replies[500].integer(), 500);
  ASSERT_TRUE(c.Pipeline({}, &replies).ok());
  EXPECT_TRUE(replies.empty());
}

TEST_F(ClientE2eTest, SelectsTheDatabase) {
  Endpoint ep = server_.endpoint();
  ep.db = 3;
  Client c3, c0;
  ASSERT_TRUE(c3.Connect(ep, 1000ms).ok());
  ASSERT_TRUE(c0.Connect(server_.endpoint(), 1000ms).ok());
  Reply r;
  ASSERT_TRUE(c3.Run({"SET", "only-in-3", "1"}, &r).ok());
  ASSERT_TRUE(c0.Run({"EXISTS", "only-in-3"}, &r).ok());
  EXPECT_EQ(r.integer(), 0);
  ep.db = 999;
  Status s = c3.Connect(ep, 1000ms);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("no database 999"), std::string_view::npos) << s.message();
  EXPECT_FALSE(c3.connected());
}

TEST_F(ClientE2eTest, WrongPasswordIsAClearErrorWithoutThePassword) {
  Endpoint ep = server_.endpoint();
  ep.password = "not-the-password-123";
  Client c;
  Status s = c.Connect(ep, 1000ms);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("refused the password for user \"default\""), std::string_view::npos)
      << s.message();
  EXPECT_NE(s.message().find("FT_REDIS_PASSWORD"), std::string_view::npos);
  EXPECT_EQ(s.ToString().find("not-the-password-123"), std::string::npos);
  EXPECT_EQ(s.ToString().find(server_.password()), std::string::npos);
  EXPECT_FALSE(c.connected());
}

TEST_F(ClientE2eTest, MissingPasswordSaysToSetIt) {
  Endpoint ep = server_.endpoint();
  ep.password.clear();
  Client c;
  Status s = c.Connect(ep, 1000ms);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("requires a password"), std::string_view::npos) << s.message();
}

TEST_F(ClientE2eTest, ServerDownIsUnavailableQuickly) {
  server_.Stop();
  Client c;
  auto start = Clock::now();
  Status s = c.Connect(server_.endpoint(), 5000ms);
  EXPECT_LT(Clock::now() - start, 2500ms);  // refused at once, not after the timeout
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("127.0.0.1:" + std::to_string(server_.port())),
            std::string_view::npos);
  EXPECT_EQ(s.ToString().find(server_.password()), std::string::npos);
}

TEST_F(ClientE2eTest, ConnectionBreaksWhenTheServerDies) {
  Client c;
  ASSERT_TRUE(c.Connect(server_.endpoint(), 1000ms).ok());
  server_.Stop();
  Reply r;
  Status s = c.Run({"PING"}, &r);  // must not die of SIGPIPE either
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_TRUE(c.broken());
  EXPECT_FALSE(c.connected());
  EXPECT_EQ(c.last_error().code(), StatusCode::kUnavailable);
  s = c.Run({"PING"}, &r);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("not connected"), std::string_view::npos);

  ASSERT_TRUE(server_.Restart().ok());
  ASSERT_TRUE(c.Connect(server_.endpoint(), 1000ms).ok());
  EXPECT_FALSE(c.broken());
  EXPECT_TRUE(c.Run({"PING"}, &r).ok());
}

TEST_F(ClientE2eTest, LargePipelineToADeadServerDoesNotKillTheProcess) {
  Client c;
  ASSERT_TRUE(c.Connect(server_.endpoint(), 1000ms).ok());
  server_.Stop();
  std::vector<Argv> cmds(2000, Argv{"SET", "k", std::string(4096, 'x')});
  std::vector<Reply> replies;
  Status s = c.PipelinePartial(cmds, &replies);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(replies.empty());
  EXPECT_TRUE(c.broken());
}

TEST_F(ClientE2eTest, StuckServerTimesOut) {
  Client c;
  ASSERT_TRUE(c.Connect(server_.endpoint(), 10000ms, 300ms).ok());
  server_.Pause();
  Reply r;
  auto start = Clock::now();
  Status s = c.Run({"PING"}, &r);
  auto took = Clock::now() - start;
  server_.Resume();
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 3000ms);  // io_timeout (300 ms), not connect_timeout (10 s), with margin
  EXPECT_TRUE(c.broken());
}

TEST(ClientAclE2eTest, AclUserAuthenticates) {
  RedisServerOptions options;
  options.acl_user = "ftuser";
  options.acl_password = "ft-user-pass-1";
  RedisServer server(options);
  ASSERT_TRUE(server.Start().ok());
  Endpoint ep = server.endpoint();
  ep.user = "ftuser";
  ep.password = "ft-user-pass-1";
  Client c;
  Status s = c.Connect(ep, 1000ms);
  ASSERT_TRUE(s.ok()) << s.ToString();
  Reply r;
  ASSERT_TRUE(c.Run({"ACL", "WHOAMI"}, &r).ok());
  EXPECT_EQ(r.str(), "ftuser");

  ep.password = "wrong-user-pass";
  s = c.Connect(ep, 1000ms);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("user \"ftuser\""), std::string_view::npos) << s.message();
  EXPECT_EQ(s.ToString().find("wrong-user-pass"), std::string::npos);
}

class LinesSink : public LogSink {
 public:
  void Write(std::string_view line) override { lines.emplace_back(line); }
  std::vector<std::string> Containing(std::string_view part) const {
    std::vector<std::string> out;
    for (const std::string& l : lines) {
      if (l.find(part) != std::string::npos) out.push_back(l);
    }
    return out;
  }
  std::vector<std::string> lines;
};

// A user whose ACL lacks a command ft sends (ftmaster acl prints the rules): the failure says
// so, and the client logs it once per command, naming the user, never the arguments.
TEST(ClientAclE2eTest, AclRefusalsAreLoggedOncePerCommandWithTheFix) {
  RedisServer server;
  ASSERT_TRUE(server.Start().ok());
  Client admin;
  ASSERT_TRUE(admin.Connect(server.endpoint(), 1000ms).ok());
  Reply r;
  ASSERT_TRUE(admin.Run({"ACL", "SETUSER", "ft-j-operator", "on", ">op-pass-1", "resetkeys",
                         "-@all", "+ping", "+get", "+select", "%R~ft:{j}:*"}, &r).ok());
  Endpoint ep = server.endpoint();
  ep.user = "ft-j-operator";
  ep.password = "op-pass-1";
  LinesSink sink;
  log::SetSink(&sink);
  Client c;
  Status s = c.Connect(ep, 1000ms);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(c.Run({"GET", "ft:{j}:restore"}, &r).ok());

  s = c.Run({"SET", "ft:{j}:restore", "value-not-logged"}, &r);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("NOPERM"), std::string_view::npos) << s.message();
  EXPECT_NE(s.message().find("ftmaster acl"), std::string_view::npos) << s.message();
  EXPECT_FALSE(c.Run({"SET", "ft:{j}:restore", "value-not-logged"}, &r).ok());
  EXPECT_FALSE(c.Run({"GET", "ft:{other}:restore"}, &r).ok());  // a key outside its patterns
  std::vector<Reply> replies;
  ASSERT_TRUE(c.Pipeline({{"GET", "ft:{j}:a"}, {"HSET", "ft:{j}:h", "f", "v"},
                          {"HSET", "ft:{j}:h", "f", "v"}}, &replies).ok());
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_TRUE(replies[1].is_error());
  log::SetSink(nullptr);

  std::vector<std::string> set = sink.Containing("refused SET to user \"ft-j-operator\"");
  ASSERT_EQ(set.size(), 1u) << "one line for two refusals of SET";
  EXPECT_NE(set[0].find("ftmaster acl"), std::string::npos) << set[0];
  EXPECT_EQ(sink.Containing("refused GET").size(), 1u);
  EXPECT_EQ(sink.Containing("refused HSET").size(), 1u) << "a refusal inside a pipeline";
  EXPECT_TRUE(sink.Containing("value-not-logged").empty());
  EXPECT_TRUE(sink.Containing("op-pass-1").empty());

  // A SELECT the user may not send is that, not a missing database.
  ASSERT_TRUE(admin.Run({"ACL", "SETUSER", "ft-j-operator", "-select"}, &r).ok());
  ep.db = 1;
  s = c.Connect(ep, 1000ms);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("NOPERM"), std::string_view::npos) << s.message();
  EXPECT_EQ(s.message().find("has no database"), std::string_view::npos) << s.message();
}

TEST(ClientNoPasswordE2eTest, PasswordForAnOpenServerStillConnects) {
  RedisServerOptions options;
  options.require_password = false;
  RedisServer server(options);
  ASSERT_TRUE(server.Start().ok());
  Endpoint ep = server.endpoint();
  Client c;
  ASSERT_TRUE(c.Connect(ep, 1000ms).ok());
  ep.password = "unneeded";
  Status s = c.Connect(ep, 1000ms);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST_F(ClientE2eTest, ReconnectingClientComesBackAfterARestart) {
  ReconnectPolicy policy;
  policy.connect_timeout = 500ms;
  policy.io_timeout = 10000ms;
  policy.seed = 3;
  ReconnectingClient rc(server_.endpoint(), policy);
  ASSERT_TRUE(rc.Ensure(Clock::now()));
  EXPECT_TRUE(rc.Ensure(Clock::now()));
  EXPECT_EQ(rc.attempts(), 1u);

  server_.Stop();
  Reply r;
  EXPECT_FALSE(rc.client().Run({"PING"}, &r).ok());
  EXPECT_FALSE(rc.Ensure(Clock::now()));  // lost: one immediate retry, refused
  EXPECT_EQ(rc.last_error().code(), StatusCode::kUnavailable);

  ASSERT_TRUE(server_.Restart().ok());
  auto deadline = Clock::now() + 3s;
  bool back = false;
  while (!back && Clock::now() < deadline) {
    auto start = Clock::now();
    back = rc.Ensure(start);
    // At most the connect timeout (500 ms), never the io timeout (10 s): the bound between
    // them leaves seconds of margin for a loaded machine.
    EXPECT_LT(Clock::now() - start, 3000ms);
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(back) << rc.last_error().ToString();
  EXPECT_EQ(rc.reconnects(), 1u);
  EXPECT_EQ(rc.failures(), 0);
  EXPECT_TRUE(rc.client().Run({"PING"}, &r).ok());
}

}  // namespace
}  // namespace ft::redis
