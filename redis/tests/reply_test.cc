#include "redis/reply.h"

#include <gtest/gtest.h>

namespace ft::redis {
namespace {

TEST(ReplyTest, Accessors) {
  Reply nil;
  EXPECT_TRUE(nil.is_nil());
  EXPECT_EQ(nil.DebugString(), "nil");
  Reply i = Reply::Integer(-42);
  EXPECT_TRUE(i.is_integer());
  EXPECT_EQ(i.integer(), -42);
  int64_t v = 0;
  EXPECT_TRUE(i.ToInt(&v));
  EXPECT_EQ(v, -42);
  Reply s = Reply::String(std::string("a\0b", 3));
  EXPECT_TRUE(s.is_string());
  EXPECT_EQ(s.str().size(), 3u);
  EXPECT_FALSE(s.ToInt(&v));
  EXPECT_TRUE(Reply::String("17").ToInt(&v));
  EXPECT_EQ(v, 17);
  EXPECT_FALSE(Reply::String("").ToInt(&v));
  EXPECT_FALSE(Reply::String("17x").ToInt(&v));
  EXPECT_TRUE(Reply::Simple("PONG").Is("PONG"));
  EXPECT_FALSE(Reply::Error("PONG").Is("PONG"));
  Reply a = Reply::Array({Reply::Integer(1), Reply::String("x"), Reply::Nil(),
                          Reply::Error("ERR no"), Reply::Simple("OK")});
  EXPECT_TRUE(a.is_array());
  EXPECT_EQ(a.size(), 5u);
  EXPECT_EQ(a[1].str(), "x");
  EXPECT_EQ(a.DebugString(), "[1, \"x\", nil, (error) ERR no, OK]");
  EXPECT_EQ(a, Reply::Array({Reply::Integer(1), Reply::String("x"), Reply::Nil(),
                             Reply::Error("ERR no"), Reply::Simple("OK")}));
}

TEST(ReplyTest, ServerErrorsMapToRecovery) {
  EXPECT_TRUE(IsTransientServerError("LOADING Redis is loading the dataset in memory"));
  EXPECT_TRUE(IsTransientServerError("OOM command not allowed when used memory > 'maxmemory'."));
  EXPECT_TRUE(IsTransientServerError("READONLY You can't write against a read only replica."));
  EXPECT_FALSE(IsTransientServerError("WRONGTYPE Operation against a key"));
  EXPECT_FALSE(IsTransientServerError("ERR syntax error"));
  EXPECT_FALSE(IsTransientServerError("LOADINGX"));

  EXPECT_EQ(ServerErrorStatus("h:1", "XADD", "LOADING x").code(), StatusCode::kUnavailable);
  EXPECT_EQ(ServerErrorStatus("h:1", "GET", "MOVED 3999 127.0.0.1:6381").code(),
            StatusCode::kUnsupported);
  Status s = ServerErrorStatus("h:1", "HSET", "WRONGTYPE Operation against a key");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "Redis at h:1 refused HSET: WRONGTYPE Operation against a key");
  s = ServerErrorStatus("h:1", "GET", "NOAUTH Authentication required.");
  EXPECT_NE(s.message().find("FT_REDIS_PASSWORD"), std::string_view::npos);
}

TEST(ReplyTest, AclRefusalsSayWhatToRun) {
  EXPECT_TRUE(IsAclRefusal("NOPERM this user has no permissions to run the 'keys' command"));
  EXPECT_TRUE(IsAclRefusal(
      "NOPERM this user has no permissions to access one of the keys used as arguments"));
  EXPECT_TRUE(IsAclRefusal("ERR The user executing the script can't access at least one of the "
                           "keys mentioned in the command arguments script: 6e1d, on "
                           "@user_script:1."));
  EXPECT_FALSE(IsAclRefusal("WRONGTYPE Operation against a key"));
  EXPECT_FALSE(IsAclRefusal("NOAUTH Authentication required."));
  EXPECT_FALSE(IsTransientServerError("NOPERM this user has no permissions to run the 'set' command"))
      << "retrying does not help: an operator must change the user";
  Status s = ServerErrorStatus("h:1", "SET", "NOPERM this user has no permissions to access one "
                                             "of the keys used as arguments");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ftmaster acl"), std::string_view::npos) << s.message();
}

}  // namespace
}  // namespace ft::redis
