#include "redis/url.h"

#include <gtest/gtest.h>

namespace ft::redis {
namespace {

Endpoint Parse(std::string_view url) {
  Endpoint ep;
  Status s = ParseUrl(url, &ep);
  EXPECT_TRUE(s.ok()) << url << ": " << s.ToString();
  return ep;
}

TEST(UrlTest, HostOnlyTakesDefaults) {
  Endpoint ep = Parse("redis://localhost");
  EXPECT_EQ(ep.host, "localhost");
  EXPECT_EQ(ep.port, 6379);
  EXPECT_EQ(ep.user, "");
  EXPECT_EQ(ep.password, "");
  EXPECT_EQ(ep.db, 0);
  EXPECT_EQ(Parse("redis://localhost/").db, 0);
}

TEST(UrlTest, EveryPart) {
  Endpoint ep = Parse("redis://alice:s3cret@redis-1.example.com:7000/3");
  EXPECT_EQ(ep.host, "redis-1.example.com");
  EXPECT_EQ(ep.port, 7000);
  EXPECT_EQ(ep.user, "alice");
  EXPECT_EQ(ep.password, "s3cret");
  EXPECT_EQ(ep.db, 3);
}

TEST(UrlTest, PasswordWithoutUserAndUserWithoutPassword) {
  Endpoint ep = Parse("redis://:pw@10.0.0.5:6380");
  EXPECT_EQ(ep.user, "");
  EXPECT_EQ(ep.password, "pw");
  EXPECT_EQ(ep.host, "10.0.0.5");
  EXPECT_EQ(ep.port, 6380);
  ep = Parse("redis://bob@h");
  EXPECT_EQ(ep.user, "bob");
  EXPECT_EQ(ep.password, "");
}

TEST(UrlTest, PercentEncodingAndAtSignsInPasswords) {
  Endpoint ep = Parse("redis://u%40x:p%3Aw%2F@h:1");
  EXPECT_EQ(ep.user, "u@x");
  EXPECT_EQ(ep.password, "p:w/");
  ep = Parse("redis://u:p@ss:w@h:2");  // the last '@' ends the password
  EXPECT_EQ(ep.password, "p@ss:w");
  EXPECT_EQ(ep.host, "h");
  ep = Parse("redis://u:pa/s?s#@h:3/1");  // '/', '?' and '#' inside a password
  EXPECT_EQ(ep.password, "pa/s?s#");
  EXPECT_EQ(ep.port, 3);
  EXPECT_EQ(ep.db, 1);
}

TEST(UrlTest, Ipv6InBrackets) {
  Endpoint ep = Parse("redis://[::1]:6390/2");
  EXPECT_EQ(ep.host, "::1");
  EXPECT_EQ(ep.port, 6390);
  EXPECT_EQ(ep.db, 2);
  EXPECT_EQ(Parse("redis://[fe80::1:2]").port, 6379);
  EXPECT_EQ(Redacted(ep), "redis://[::1]:6390/2");
}

TEST(UrlTest, BadUrlsSayWhatIsWrong) {
  struct Case {
    const char* url;
    StatusCode code;
    const char* says;
  };
  const Case cases[] = {
      {"", StatusCode::kInvalidArgument, "must start with redis://"},
      {"localhost:6379", StatusCode::kInvalidArgument, "must start with redis://"},
      {"http://h:1", StatusCode::kInvalidArgument, "must start with redis://"},
      {"rediss://h:1", StatusCode::kUnsupported, "TLS"},
      {"unix:///tmp/redis.sock", StatusCode::kUnsupported, "unix socket"},
      {"redis://", StatusCode::kInvalidArgument, "no host"},
      {"redis://:6379", StatusCode::kInvalidArgument, "no host"},
      {"redis://h:", StatusCode::kInvalidArgument, "empty port"},
      {"redis://h:0", StatusCode::kInvalidArgument, "port must be a number from 1 to 65535"},
      {"redis://h:65536", StatusCode::kInvalidArgument, "port must be"},
      {"redis://h:12ab", StatusCode::kInvalidArgument, "port must be"},
      {"redis://h:-1", StatusCode::kInvalidArgument, "port must be"},
      {"redis://h:1/x", StatusCode::kInvalidArgument, "database"},
      {"redis://h:1/-1", StatusCode::kInvalidArgument, "database"},
      {"redis://h:1/1/2", StatusCode::kInvalidArgument, "database"},
      {"redis://h:1?timeout=1", StatusCode::kInvalidArgument, "query"},
      {"redis://h w:1", StatusCode::kInvalidArgument, "bad character in the host"},
      {"redis://::1:6379", StatusCode::kInvalidArgument, "brackets"},
      {"redis://[::1", StatusCode::kInvalidArgument, "without ']'"},
      {"redis://[]:1", StatusCode::kInvalidArgument, "empty IPv6"},
      {"redis://[::1]x", StatusCode::kInvalidArgument, "':port'"},
      {"redis://[zz::1]:1", StatusCode::kInvalidArgument, "IPv6"},
      {"redis://u:p%zz@h", StatusCode::kInvalidArgument, "%-escape in the password"},
      {"redis://u%4@h", StatusCode::kInvalidArgument, "%-escape in the user"},
  };
  for (const Case& c : cases) {
    Endpoint ep;
    ep.host = "untouched";
    Status s = ParseUrl(c.url, &ep);
    EXPECT_EQ(s.code(), c.code) << c.url << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.says), std::string_view::npos) << c.url << ": " << s.message();
    EXPECT_EQ(ep.host, "untouched") << c.url;
  }
}

TEST(UrlTest, ErrorsNeverShowThePassword) {
  for (const char* url : {"redis://u:topsecret@h:99999", "redis://u:topsecret@h:1/x",
                          "rediss://u:topsecret@h", "redis://:topsecret@h w",
                          "redis://u:topsecret@h?x=1",
                          "redis://u:top/secret@h:0", "redis://u:top@secret@h:0"}) {
    Endpoint ep;
    Status s = ParseUrl(url, &ep);
    ASSERT_FALSE(s.ok()) << url;
    EXPECT_EQ(s.ToString().find("secret"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("***"), std::string_view::npos) << s.message();
  }
}

TEST(UrlTest, PasswordInAnArgumentIsWarnedAbout) {
  std::string w = PasswordInArgumentWarning("redis://alice:s3cret@h:7000", "--redis");
  EXPECT_NE(w.find("--redis"), std::string::npos) << w;
  EXPECT_NE(w.find("ps"), std::string::npos) << w;
  EXPECT_NE(w.find("FT_REDIS_PASSWORD"), std::string::npos) << w;
  EXPECT_NE(w.find("redis://alice:***@h:7000"), std::string::npos) << w;
  EXPECT_EQ(w.find("s3cret"), std::string::npos) << w;
  EXPECT_NE(PasswordInArgumentWarning("redis://:p%40ss@h", "--redis").find("***"), std::string::npos);
  // No password, or no URL: nothing to warn about.
  EXPECT_EQ(PasswordInArgumentWarning("redis://alice@h:7000", "--redis"), "");
  EXPECT_EQ(PasswordInArgumentWarning("redis://h", "--redis"), "");
  EXPECT_EQ(PasswordInArgumentWarning("", "--redis"), "");
}

TEST(UrlTest, RedactedHidesThePassword) {
  Endpoint ep = Parse("redis://alice:s3cret@h:7000/3");
  EXPECT_EQ(Redacted(ep), "redis://alice:***@h:7000/3");
  ep.user.clear();
  EXPECT_EQ(Redacted(ep), "redis://:***@h:7000/3");
  ep.password.clear();
  EXPECT_EQ(Redacted(ep), "redis://h:7000/3");
  ep.db = 0;
  EXPECT_EQ(Redacted(ep), "redis://h:7000");
  ep.user = "bob";
  EXPECT_EQ(Redacted(ep), "redis://bob@h:7000");
}

TEST(UrlTest, RedactedParsesBackWithoutThePassword) {
  Endpoint ep = Parse("redis://alice@[::1]:7000/3");
  EXPECT_EQ(Parse(Redacted(ep)), ep);
}

TEST(EndpointFromConfigTest, EnvironmentOverridesTheUrl) {
  Config config = Config::Defaults();
  Endpoint ep;
  Status s = EndpointFromConfig(config, "", &ep);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("FT_REDIS"), std::string_view::npos);

  config.redis_url = "redis://u:urlpw@h:1/2";
  ASSERT_TRUE(EndpointFromConfig(config, "", &ep).ok());
  EXPECT_EQ(ep.user, "u");
  EXPECT_EQ(ep.password, "urlpw");

  config.redis_user = "envuser";
  config.redis_password = "envpw";
  ASSERT_TRUE(EndpointFromConfig(config, "", &ep).ok());
  EXPECT_EQ(ep.user, "envuser");
  EXPECT_EQ(ep.password, "envpw");
  EXPECT_EQ(ep.host, "h");
  EXPECT_EQ(ep.db, 2);

  // --redis wins over FT_REDIS; the credentials still come from the environment.
  ASSERT_TRUE(EndpointFromConfig(config, "redis://other:9", &ep).ok());
  EXPECT_EQ(ep.host, "other");
  EXPECT_EQ(ep.port, 9);
  EXPECT_EQ(ep.password, "envpw");

  Endpoint keep = ep;
  EXPECT_EQ(EndpointFromConfig(config, "nonsense", &ep).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ep, keep);
}

}  // namespace
}  // namespace ft::redis
