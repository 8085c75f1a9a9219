#include "common/status.h"

#include <cerrno>

#include <gtest/gtest.h>

namespace ft {
namespace {

TEST(StatusTest, DefaultIsOkAndCostsOnePointer) {
  Status status;
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kOk);
  EXPECT_EQ(status.ToString(), "OK");
  EXPECT_EQ(sizeof(Status), sizeof(void*));
}

TEST(StatusTest, CarriesCodeMessageAndLocation) {
  Status status = Status::Corrupt("record 12 has length 9000");
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kCorrupt);
  EXPECT_EQ(status.message(), "record 12 has length 9000");
  EXPECT_NE(status.ToString().find("Corrupt: record 12 has length 9000 (status_test.cc:"),
            std::string::npos)
      << status.ToString();
}

TEST(StatusTest, CopyIsDeepAndIndependent) {
  Status original = Status::Timeout("waited 5s");
  Status copy = original;
  Status with_context = original.WithContext("reading segment");
  EXPECT_EQ(copy.message(), "waited 5s");
  EXPECT_EQ(with_context.message(), "reading segment: waited 5s");
  EXPECT_EQ(with_context.code(), StatusCode::kTimeout);
  EXPECT_EQ(original.message(), "waited 5s");
  copy = Status::Ok();
  EXPECT_TRUE(copy.ok());
  EXPECT_FALSE(original.ok());
}

TEST(StatusTest, ErrnoMapsToRecoveryClass) {
  EXPECT_EQ(Status::FromErrno(ENOENT, "open x").code(), StatusCode::kNotFound);
  EXPECT_EQ(Status::FromErrno(EAGAIN, "read").code(), StatusCode::kNotReady);
  EXPECT_EQ(Status::FromErrno(ECONNREFUSED, "connect").code(), StatusCode::kUnavailable);
  EXPECT_EQ(Status::FromErrno(ETIMEDOUT, "connect").code(), StatusCode::kTimeout);
  EXPECT_EQ(Status::FromErrno(EACCES, "shm_open").code(), StatusCode::kIoError);
  EXPECT_EQ(Status::FromErrno(ENOENT, "open /x").message(), "open /x: No such file or directory");
}

Status FailsThenNeverReaches(int* reached) {
  FT_RETURN_IF_ERROR(Status::Unavailable("redis down"));
  *reached = 1;
  return Status::Ok();
}

TEST(StatusTest, ReturnIfErrorPropagates) {
  int reached = 0;
  Status status = FailsThenNeverReaches(&reached);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(reached, 0);
}

TEST(StatusTest, CodesAreOrderedByRecoverySeverity) {
  EXPECT_LT(StatusCode::kOk, StatusCode::kNotReady);
  EXPECT_LT(StatusCode::kNotReady, StatusCode::kInvalidArgument);
  EXPECT_LT(StatusCode::kUnavailable, StatusCode::kInternal);
  EXPECT_STREQ(StatusCodeName(StatusCode::kIoError), "IoError");
}

}  // namespace
}  // namespace ft
