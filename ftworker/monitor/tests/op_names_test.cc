#include "ftworker/monitor/op_names.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <iterator>
#include <string>
#include <vector>

#include "ftworker/monitor/process_probe.h"
#include "proto/messages.h"
#include "shm/records.h"

namespace ft::worker {
namespace {

TEST(OpNames, CommIds) {
  EXPECT_EQ(CommHex(0x3fa2), "0000000000003fa2");
}

TEST(OpNames, ApiCallsFromTheDefLists) {
  EXPECT_STREQ(ApiLibraryName(1), "cudart");
  EXPECT_STREQ(ApiLibraryName(2), "nccl");
  // By id, a function of the name only (values pinned in shm/tests/records_test.cc).
  EXPECT_EQ(ApiCallName(1, shm::ApiSymbolId("__cudaLaunchKernel")), "__cudaLaunchKernel");
  EXPECT_EQ(ApiCallName(1, 0x0022810a8c886b42ull), "cudaMalloc");
  EXPECT_EQ(ApiCallName(2, shm::ApiSymbolId("ncclAllReduce")), "ncclAllReduce");
  EXPECT_EQ(ApiCallName(2, shm::ApiSymbolId("ncclCommUserRank")), "ncclCommUserRank");
  // Not a .def index any more: 0 is the first line of neither list.
  EXPECT_EQ(ApiCallName(1, 0), "#0000000000000000");
  EXPECT_EQ(ApiCallName(2, shm::ApiSymbolId("ncclNotInThisBuild")),
            fmt::format("#{:016x}", shm::ApiSymbolId("ncclNotInThisBuild")));
  // The library matters: a cudart id is not a nccl symbol.
  EXPECT_EQ(ApiCallName(2, shm::ApiSymbolId("cudaMalloc")).front(), '#');
  EXPECT_EQ(ApiCallName(7, shm::ApiSymbolId("cudaMalloc")).front(), '#');
  EXPECT_EQ(ApiCallNameV1(3), "#3 (symbol index of an older libft.so)");
}

// Every symbol of both lists is named back from its id.
TEST(OpNames, EverySymbolRoundTrips) {
  size_t n = 0;
#define FT_CUDA(ret, name, params, args, kind) \
  EXPECT_EQ(ApiCallName(1, shm::ApiSymbolId(#name)), #name); ++n;
#define FT_CUDA_REAL(ret, name, params) \
  EXPECT_EQ(ApiCallName(1, shm::ApiSymbolId(#name)), #name); ++n;
#include "shm/cudart.def"
#undef FT_CUDA
#undef FT_CUDA_REAL
#define FT_NCCL(ret, name, params, args, kind) \
  EXPECT_EQ(ApiCallName(2, shm::ApiSymbolId(#name)), #name); ++n;
#include "shm/nccl.def"
#undef FT_NCCL
  EXPECT_GT(n, 50u);
}

// A line inserted at the top of a .def list (a new symbol, which a libft.so from another build
// may have) moves every later symbol one place down; their ids, and so the names a reader
// gives their errors, stay the same. On record version 1 (an index) every error after the
// insertion was named as its neighbour.
TEST(OpNames, AnInsertedDefLineRenamesNothing) {
  std::vector<std::string> before, after = {"cudaInsertedBeforeEverything"};
#define FT_CUDA(ret, name, params, args, kind) before.push_back(#name), after.push_back(#name);
#define FT_CUDA_REAL(ret, name, params) before.push_back(#name), after.push_back(#name);
#include "shm/cudart.def"
#undef FT_CUDA
#undef FT_CUDA_REAL
  ASSERT_EQ(after.size(), before.size() + 1);
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(shm::ApiSymbolId(after[i + 1]), shm::ApiSymbolId(before[i]));
    EXPECT_EQ(ApiCallName(1, shm::ApiSymbolId(after[i + 1])), before[i]);
  }
  EXPECT_EQ(ApiCallName(1, shm::ApiSymbolId(after[0])).front(), '#');
}

TEST(ProcStat, ParsesNamesWithSpacesAndParens) {
  auto s = ParseProcStat("42 (python (x) y) S 1 42 42 0 -1 4194560 1 0 0 0 17 5 0 0 20 0 1 0 "
                         "12345 1000 10 18446744073709551615\n");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->state, 'S');
  EXPECT_EQ(s->cpu_ticks, 22u);
  EXPECT_EQ(s->start_ticks, 12345u);
  EXPECT_FALSE(ParseProcStat("garbage"));
  EXPECT_FALSE(ParseProcStat("1 (x) S 1 2"));
  EXPECT_FALSE(s->wait_status) << "a kernel before 3.5 writes no field 52";
}

TEST(ProcStat, AZombiesWaitStatusIsField52) {
  // A zombie killed by SIGKILL: exit_code (field 52) is the waitpid(2) status, 9.
  std::string text = "42 (trainsim) Z 1 42 42 0 -1 4194560 1 0 0 0 17 5 0 0 20 0 1 0 12345 0 0";
  for (int field = 25; field <= 51; ++field) text += " 0";
  auto s = ParseProcStat(text + " 9\n");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->state, 'Z');
  ASSERT_TRUE(s->wait_status);
  EXPECT_TRUE(WIFSIGNALED(*s->wait_status));
  EXPECT_EQ(WTERMSIG(*s->wait_status), SIGKILL);
  s = ParseProcStat(text + " 256\n");  // exit(1)
  ASSERT_TRUE(s && s->wait_status);
  EXPECT_TRUE(WIFEXITED(*s->wait_status));
  EXPECT_EQ(WEXITSTATUS(*s->wait_status), 1);
  EXPECT_FALSE(ParseProcStat(text + " x\n")->wait_status) << "garbage is no status";
}

TEST(ProcStat, OwnProcess) {
  auto s = SystemProcessProbe()->ReadStat(getpid());
  ASSERT_TRUE(s);
  EXPECT_EQ(s->state, 'R');
  EXPECT_TRUE(SystemProcessProbe()->PidExists(getpid()));
  EXPECT_GT(SystemProcessProbe()->BootTimeUnixS(), 0);
}

// A record's op kind becomes the proto kind of the same name (Redis values and metric labels
// carry shm::OpKindName's names); every kind this build knows maps to a known one, and a
// newer libft.so's kind to kOther, never to a name the codec would refuse.
TEST(OpNames, RecordOpKindsBecomeProtoKindsOfTheSameName) {
  int known = 0;
  for (uint32_t k = 0; k < 256; ++k) {
    const std::string shm_name = shm::OpKindName(k);
    const proto::OpKind kind = shm::OpKindOfRecord(k);
    if (shm_name == fmt::format("op{}", k)) {
      EXPECT_EQ(kind, proto::OpKind::kOther) << shm_name;
      continue;
    }
    ++known;
    EXPECT_EQ(proto::OpKindName(kind), shm_name) << k;
    EXPECT_NE(kind, proto::OpKind::kOther) << shm_name;
  }
  // Every proto kind but kOther is some record's.
  EXPECT_EQ(known, static_cast<int>(std::size(proto::kOpKinds)) - 1);
  EXPECT_EQ(shm::OpKindOfRecord(static_cast<uint32_t>(shm::OpKind::kSend)), proto::OpKind::kSend);
  EXPECT_EQ(shm::OpKindOfRecord(0), proto::OpKind::kNone);
}

}  // namespace
}  // namespace ft::worker
