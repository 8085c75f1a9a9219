#include "proto/notice.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proto/keys.h"

namespace ft::proto {
namespace {

Status Parse(std::vector<std::string> fields, Notice* out) { return ParseNotice(fields, out); }

TEST(NoticeTest, EveryKindSurvivesItsFields) {
  for (NoticeKind kind : {NoticeKind::kTimeouts, NoticeKind::kRestore, NoticeKind::kSecret,
                          NoticeKind::kWindow}) {
    for (bool open : {false, true}) {
      Notice n;
      n.kind = kind;
      if (kind == NoticeKind::kWindow) {
        n.open = open;
        n.window = "1700000000000-3";
      }
      Notice back;
      ASSERT_TRUE(Parse(NoticeFields(n), &back).ok()) << NoticeKindName(kind);
      EXPECT_EQ(back, n) << NoticeKindName(kind);
    }
  }
}

// A window names the ranks whose tables it needs; one that names none asks every rank's.
TEST(NoticeTest, AWindowCarriesTheRanksItNeedsOrNone) {
  Notice n{.kind = NoticeKind::kWindow, .open = true, .window = "1-0", .ranks = {}};
  n.ranks = RankRanges::Of(std::vector<int>{24, 25, 26, 27, 28, 29, 30, 31, 3, 2051});
  const std::vector<std::string> fields = NoticeFields(n);
  ASSERT_EQ(fields.back(), "3,24-31,2051");
  Notice back;
  ASSERT_TRUE(Parse(fields, &back).ok());
  EXPECT_EQ(back, n);
  ASSERT_TRUE(back.ranks.has_value());
  EXPECT_TRUE(back.ranks->Contains(27));
  EXPECT_FALSE(back.ranks->Contains(32));

  Notice all{.kind = NoticeKind::kWindow, .open = true, .window = "1-0", .ranks = {}};
  ASSERT_TRUE(Parse(NoticeFields(all), &back).ok());
  EXPECT_FALSE(back.ranks.has_value()) << "no ranks named: every rank's table";
}

TEST(NoticeTest, TheKindNamesAreTheDocumentedOnes) {
  EXPECT_EQ(NoticeKindName(NoticeKind::kTimeouts), "timeouts");
  EXPECT_EQ(NoticeKindName(NoticeKind::kRestore), "restore");
  EXPECT_EQ(NoticeKindName(NoticeKind::kSecret), "secret");
  EXPECT_EQ(NoticeKindName(NoticeKind::kWindow), "window");
  EXPECT_EQ(Keys("j").Notify(), "ft:{j}:notify");
}

TEST(NoticeTest, FieldsANewerMasterAddsAreIgnored) {
  Notice n;
  ASSERT_TRUE(Parse({"kind", "restore", "reason", "a new plan"}, &n).ok());
  EXPECT_EQ(n.kind, NoticeKind::kRestore);
}

TEST(NoticeTest, MalformedEntriesAreRefusedByNameAndLeaveTheOutputAlone) {
  Notice sentinel;
  sentinel.kind = NoticeKind::kSecret;
  struct Case {
    std::vector<std::string> fields;
    std::string names;
  };
  const std::vector<Case> cases = {
      {{}, "no kind"},
      {{"kind"}, "odd number"},
      {{"kind", "reboot"}, "unknown kind \"reboot\""},
      {{"kind", "window"}, "without open"},
      {{"kind", "window", "open", "yes"}, "open is neither"},
      {{"kind", "window", "open", "1", "window", std::string(300, 'x')}, "longer than 256"},
      {{"kind", "window", "open", "1", "ranks", "7-3"}, "ends before it starts"},
      {{"kind", "window", "open", "1", "ranks", std::string(5000, '1')}, "longer than 4096"},
  };
  for (const Case& c : cases) {
    Notice out = sentinel;
    Status s = Parse(c.fields, &out);
    EXPECT_EQ(s.code(), StatusCode::kCorrupt) << c.names;
    EXPECT_NE(s.message().find(c.names), std::string::npos) << s.message();
    EXPECT_EQ(out, sentinel) << c.names;
  }
}

}  // namespace
}  // namespace ft::proto
