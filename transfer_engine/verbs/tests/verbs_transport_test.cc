// The verbs fast path over the fake NIC: connect (QP state machine and attributes on both
// sides), post (many reads in flight on every QP), complete (bytes and landed() per piece,
// memory registered once), error completion (the path ends; exactly the unlanded pieces come
// back, nothing lands afterwards) and the hand-back to another path.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>

#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

#include "transfer_engine/verbs/tests/fake_verbs.h"
#include "transfer_engine/verbs/tests/verbs_test_util.h"
#include "transfer_engine/verbs/verbs_blob.h"
#include "transfer_engine/verbs/verbs_transport.h"

namespace ft::rdma::testing {
namespace {

using std::chrono::milliseconds;

bool Has(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

// The client's QPs are those without remote-read access (the server's responders have it).
std::vector<uint32_t> ClientQps(const FakeVerbs& fake) {
  std::vector<uint32_t> out;
  for (uint32_t n : fake.qp_nums()) {
    if (!(fake.qp(n).access & IBV_ACCESS_REMOTE_READ)) out.push_back(n);
  }
  return out;
}

struct FetchOutcome {
  Status status;
  std::vector<size_t> left;
  std::multiset<size_t> landed;
};

FetchOutcome Fetch(PiecePath* path, const std::vector<Piece>& pieces) {
  FetchOutcome out;
  out.status = path->Fetch(pieces, [&](size_t i) { out.landed.insert(i); }, &out.left);
  return out;
}

bool PieceEquals(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, const Piece& p) {
  return std::equal(a.begin() + p.offset, a.begin() + p.offset + p.len, b.begin() + p.offset);
}

TEST(verbs_connect, BothSidesReachRtsWithMatchingAttributes) {
  FakeVerbs fake;
  VerbsPair pair;
  ASSERT_TRUE(pair.Open(fake.api()).ok());
  BufferRegion region(RandomBytes(1 << 20, 1));
  std::vector<uint8_t> dest(region.size());
  std::unique_ptr<PiecePath> path;
  Status s = pair.Connect(region, dest.data(), dest.size(), &path);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_STREQ(path->kind(), "verbs");
  EXPECT_EQ(pair.exchanges, 1);
  EXPECT_FALSE(Has(fake.transitions(), "refused")) << fake.transitions().back();

  std::vector<uint32_t> client = ClientQps(fake);
  ASSERT_EQ(client.size(), 4u);
  ASSERT_EQ(fake.qp_nums().size(), 8u);
  std::set<uint32_t> peers;
  for (uint32_t c : client) {
    for (const char* step : {"RESET->INIT", "INIT->RTR", "RTR->RTS"}) {
      EXPECT_TRUE(Has(fake.transitions(), fmt::format("qp {} {}", c, step))) << c << " " << step;
    }
    FakeVerbs::QpView cv = fake.qp(c);
    EXPECT_EQ(cv.state, IBV_QPS_RTS);
    FakeVerbs::QpView sv = fake.qp(cv.attr.dest_qp_num);
    EXPECT_EQ(sv.state, IBV_QPS_RTS);
    EXPECT_EQ(sv.attr.dest_qp_num, c) << "connected to each other";
    EXPECT_EQ(cv.attr.sq_psn, sv.attr.rq_psn);
    EXPECT_EQ(sv.attr.sq_psn, cv.attr.rq_psn);
    EXPECT_EQ(cv.attr.ah_attr.dlid, pair.server_device->address().lid);
    EXPECT_EQ(sv.attr.ah_attr.dlid, pair.client_device->address().lid);
    EXPECT_EQ(cv.attr.path_mtu, IBV_MTU_4096);
    EXPECT_EQ(cv.attr.max_rd_atomic, 16) << "as many reads in flight as both NICs allow";
    EXPECT_EQ(sv.attr.max_dest_rd_atomic, 16);
    EXPECT_EQ(sv.access, IBV_ACCESS_REMOTE_READ) << "the server's QPs serve reads and nothing else";
    EXPECT_EQ(cv.max_send_wr, 16u);
    EXPECT_GT(cv.attr.timeout, 0);
    EXPECT_GT(cv.attr.retry_cnt, 0);
    peers.insert(cv.attr.dest_qp_num);
  }
  EXPECT_EQ(peers.size(), 4u) << "one responder per client QP";
  EXPECT_EQ(pair.server->connections(), 1u);
}

TEST(verbs_connect, ReadsInFlightAreTheFewestBothSidesAllow) {
  for (int want : {4, 64}) {
    FakeVerbs fake;  // its NICs allow 16 reads per QP as initiator and as responder
    VerbsOptions options;
    options.reads_per_qp = want;
    VerbsPair pair;
    ASSERT_TRUE(pair.Open(fake.api(), options).ok());
    BufferRegion region(RandomBytes(1 << 20, 15));
    std::vector<uint8_t> dest(region.size());
    std::unique_ptr<PiecePath> path;
    ASSERT_TRUE(pair.Connect(region, dest.data(), dest.size(), &path).ok());
    const int expected = std::min(want, 16);
    for (uint32_t c : ClientQps(fake)) {
      FakeVerbs::QpView cv = fake.qp(c);
      EXPECT_EQ(cv.attr.max_rd_atomic, expected) << "want " << want;
      EXPECT_EQ(fake.qp(cv.attr.dest_qp_num).attr.max_dest_rd_atomic, expected) << "want " << want;
      EXPECT_EQ(cv.max_send_wr, static_cast<uint32_t>(want)) << "more may wait in the send queue";
    }
    FetchOutcome out = Fetch(path.get(), Pieces(dest.size(), 16384));
    ASSERT_TRUE(out.status.ok()) << out.status.ToString();
    EXPECT_EQ(dest, region.bytes());
  }
}

TEST(verbs_connect, RoceAddressesThePeerThroughItsGid) {
  FakeNicConfig config;
  config.link_layer = IBV_LINK_LAYER_ETHERNET;
  FakeVerbs fake(config);
  VerbsPair pair;
  ASSERT_TRUE(pair.Open(fake.api()).ok());
  BufferRegion region(RandomBytes(300000, 2));
  std::vector<uint8_t> dest(region.size());
  std::unique_ptr<PiecePath> path;
  ASSERT_TRUE(pair.Connect(region, dest.data(), dest.size(), &path).ok());
  for (uint32_t c : ClientQps(fake)) {
    FakeVerbs::QpView cv = fake.qp(c);
    EXPECT_EQ(cv.attr.ah_attr.is_global, 1);
    EXPECT_EQ(0, std::memcmp(cv.attr.ah_attr.grh.dgid.raw, pair.server_device->address().gid, 16));
  }
  FetchOutcome out = Fetch(path.get(), Pieces(dest.size(), 65536));
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(dest, region.bytes());
}

TEST(verbs_connect, BadOffersRepliesAndRequestsFailWithoutLeaks) {
  FakeVerbs fake;
  VerbsPair pair;
  ASSERT_TRUE(pair.Open(fake.api()).ok());
  BufferRegion region(RandomBytes(100000, 3));
  std::vector<uint8_t> dest(region.size());
  std::unique_ptr<PiecePath> path;
  Exchange refuse = [](std::string_view, std::string*) { return Status::Unavailable("peer closed"); };
  Exchange garbage = [](std::string_view, std::string* reply) {
    *reply = "FTVA garbage";
    return Status::Ok();
  };

  EXPECT_EQ(pair.client->Connect("not an offer", dest.data(), dest.size(), refuse, &path).code(), StatusCode::kCorrupt);
  std::string offer = pair.server->Offer(region);
  Status s = pair.client->Connect(offer, dest.data(), dest.size(), refuse, &path);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("peer closed"), std::string_view::npos) << s.ToString();
  EXPECT_EQ(pair.client->Connect(offer, dest.data(), dest.size(), garbage, &path).code(), StatusCode::kCorrupt);
  EXPECT_EQ(pair.client->Connect(offer, dest.data(), dest.size() + 1, refuse, &path).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(path, nullptr);
  EXPECT_TRUE(fake.qp_nums().empty()) << "QPs of failed connects are destroyed";

  std::string reply;
  EXPECT_EQ(pair.server->Accept(region, "FTVC", &reply).code(), StatusCode::kCorrupt);
  EXPECT_EQ(pair.server->connections(), 0u);

  // A peer on another link layer: told at Connect, before any QP exists.
  VerbsOffer parsed;
  ASSERT_TRUE(ParseVerbsOffer(offer, &parsed).ok());
  parsed.address.link_layer = IBV_LINK_LAYER_ETHERNET;
  parsed.address.use_gid = 1;
  s = pair.client->Connect(EncodeVerbsOffer(parsed), dest.data(), dest.size(), refuse, &path);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("link layers differ"), std::string_view::npos) << s.ToString();
  pair.Close();
  EXPECT_EQ(fake.live_objects(), 0u);
}

// The fake holds the transport to the NIC's rules; this pins that it refuses what a NIC does.
TEST(verbs_connect, FakeNicRefusesWrongTransitionsAndPostsOutsideRts) {
  FakeVerbs fake;
  const VerbsApi& api = fake.api();
  int n = 0;
  ibv_device** list = api.get_device_list(&n);
  ASSERT_EQ(n, 2);
  ibv_context* context = api.open_device(list[0]);
  api.free_device_list(list);
  ibv_pd* pd = api.alloc_pd(context);
  ibv_cq* cq = api.create_cq(context, 4, nullptr, nullptr, 0);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 2;
  init.cap.max_send_sge = 1;
  ibv_qp* qp = api.create_qp(pd, &init);
  ASSERT_NE(qp, nullptr);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  EXPECT_EQ(api.modify_qp(qp, &attr, IBV_QP_STATE), EINVAL) << "RESET->RTR skips INIT";
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = 1;
  EXPECT_EQ(api.modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), EINVAL) << "no access flags";
  EXPECT_EQ(api.modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS | IBV_QP_SQ_PSN),
            EINVAL)
      << "an attribute INIT does not take";
  EXPECT_EQ(api.modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
  ibv_send_wr wr{};
  ibv_sge sge{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(api.post_send(qp, &wr, &bad), EINVAL) << "posting in INIT";
  EXPECT_EQ(bad, &wr);
  EXPECT_EQ(api.destroy_cq(cq), EBUSY) << "a QP still uses it";
  EXPECT_EQ(api.destroy_qp(qp), 0);
  EXPECT_EQ(api.destroy_cq(cq), 0);
  EXPECT_EQ(api.dealloc_pd(pd), 0);
  EXPECT_EQ(api.close_device(context), 0);
  EXPECT_TRUE(Has(fake.transitions(), "RESET->RTR refused"));
  EXPECT_EQ(fake.live_objects(), 0u);
}

TEST(verbs_post, KeepsManyReadsInFlightOnEveryQp) {
  FakeVerbs fake;
  VerbsOptions options;
  options.max_read_bytes = 65536;
  VerbsPair pair;
  ASSERT_TRUE(pair.Open(fake.api(), options).ok());
  BufferRegion region(RandomBytes(8 << 20, 4));
  std::vector<uint8_t> dest(region.size());
  std::unique_ptr<PiecePath> path;
  ASSERT_TRUE(pair.Connect(region, dest.data(), dest.size(), &path).ok());
  FetchOutcome out = Fetch(path.get(), Pieces(dest.size(), 4 << 20));
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(fake.reads_executed(), 128u) << "4 MiB pieces read in 64 KiB requests";
  for (uint32_t c : ClientQps(fake)) {
    EXPECT_EQ(fake.qp(c).most_queued, 16u) << "qp " << c << ": the window is full, not one read at a time";
    EXPECT_EQ(fake.qp(c).reads, 32u) << "qp " << c << ": reads spread evenly";
  }
  EXPECT_FALSE(fake.cq_overrun());
  EXPECT_EQ(dest, region.bytes());
}

TEST(verbs_complete, BytesLandAndEachPieceIsReportedOnceAfterItsLastRead) {
  FakeNicConfig config;
  config.reads_per_poll = 3;
  FakeVerbs fake(config);
  VerbsOptions options;
  options.max_read_bytes = 100000;  // pieces of 256 KiB take three reads, the last one short
  VerbsPair pair;
  ASSERT_TRUE(pair.Open(fake.api(), options).ok());
  BufferRegion region(RandomBytes((3 << 20) + 123, 5));
  std::vector<uint8_t> dest(region.size(), 0xee);
  std::unique_ptr<PiecePath> path;
  ASSERT_TRUE(pair.Connect(region, dest.data(), dest.size(), &path).ok());
  std::vector<Piece> all = Pieces(dest.size(), 256 << 10);
  std::vector<Piece> some = {all[7], all[2], all.back(), {5, 0}};  // out of order, one empty
  std::vector<bool> complete_when_landed;
  std::vector<size_t> left;
  Status s = path->Fetch(
      some,
      [&](size_t i) { complete_when_landed.push_back(PieceEquals(dest, region.bytes(), some[i])); },
      &left);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(left.empty());
  ASSERT_EQ(complete_when_landed.size(), 4u);
  for (bool complete : complete_when_landed) EXPECT_TRUE(complete) << "landed() only once all its bytes are in";
  for (size_t i = 0; i < all.size(); ++i) {
    bool fetched = i == 7 || i == 2 || i == all.size() - 1;
    EXPECT_EQ(PieceEquals(dest, region.bytes(), all[i]), fetched) << "piece " << i;
  }
  // The rest, on the same path.
  FetchOutcome out = Fetch(path.get(), all);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.landed.size(), all.size());
  EXPECT_EQ(std::set<size_t>(out.landed.begin(), out.landed.end()).size(), all.size()) << "each piece once";
  EXPECT_EQ(dest, region.bytes());
  FetchOutcome beyond = Fetch(path.get(), {{dest.size() - 10, 11}});
  EXPECT_EQ(beyond.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(beyond.left, std::vector<size_t>{0});
  path.reset();
  pair.Close();
  EXPECT_EQ(fake.live_objects(), 0u) << "QPs, CQs, MRs, PDs and contexts all released";
}

TEST(verbs_complete, MemoryIsRegisteredOnceAcrossConnectionsAndInsideAnArena) {
  FakeVerbs fake;
  VerbsPair pair;
  ASSERT_TRUE(pair.Open(fake.api()).ok());
  std::vector<uint8_t> arena = RandomBytes(1 << 20, 6);
  ASSERT_TRUE(pair.server->Register(arena.data(), arena.size()).ok());  // at arena creation
  EXPECT_EQ(fake.registrations(), 1u);
  ViewRegion data(arena.data() + 4096, arena.size() - 8192);  // the arena's data inside its mapping
  std::vector<uint8_t> dest(data.size());
  ASSERT_TRUE(pair.client->Register(dest.data(), dest.size()).ok());
  EXPECT_EQ(fake.registrations(), 2u);
  for (int round = 0; round < 3; ++round) {
    std::fill(dest.begin(), dest.end(), 0);
    std::unique_ptr<PiecePath> path;
    ASSERT_TRUE(pair.Connect(data, dest.data(), dest.size(), &path).ok());
    FetchOutcome out = Fetch(path.get(), Pieces(dest.size(), 100000));
    ASSERT_TRUE(out.status.ok()) << out.status.ToString();
    EXPECT_TRUE(std::equal(dest.begin(), dest.end(), arena.begin() + 4096)) << "round " << round;
  }
  EXPECT_EQ(fake.registrations(), 2u) << "no registration on the restore path";
  EXPECT_EQ(pair.server->registrations(), 1u);
  pair.server->Forget(arena.data(), arena.size());
  EXPECT_EQ(pair.server->registrations(), 0u);
}

// Registration pins pages: a destination unmapped and replaced by another file at the same
// address (a prefetch arena removed and created again) is not where the NIC writes. The fake
// NIC keeps that rule, so the client must Forget the memory before it is unmapped.
TEST(verbs_complete, ARegistrationOutlivingItsMappingLandsNothingUntilForgotten) {
  FakeVerbs fake;
  VerbsPair pair;
  ASSERT_TRUE(pair.Open(fake.api()).ok());
  BufferRegion region(RandomBytes(1 << 20, 9));
  const size_t bytes = region.size();
  auto map_file = [&](void* at) {
    int fd = memfd_create("verbs-dest", MFD_CLOEXEC);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
    void* p = mmap(at, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | (at != nullptr ? MAP_FIXED : 0), fd, 0);
    close(fd);
    EXPECT_NE(p, MAP_FAILED);
    return static_cast<uint8_t*>(p);
  };
  auto pull = [&](uint8_t* dest) {
    std::unique_ptr<PiecePath> path;
    Status s = pair.Connect(region, dest, bytes, &path);
    if (!s.ok()) return s;
    return Fetch(path.get(), Pieces(bytes, 256 << 10)).status;
  };
  uint8_t* dest = map_file(nullptr);
  ASSERT_TRUE(pair.client->Register(dest, bytes).ok());
  ASSERT_TRUE(pull(dest).ok());
  EXPECT_TRUE(std::equal(dest, dest + bytes, region.bytes().begin()));
  EXPECT_EQ(fake.stale_reads(), 0u);

  // Another file at the same address, the registration kept: every read "succeeds" and
  // nothing arrives.
  ASSERT_EQ(map_file(dest), dest);
  ASSERT_TRUE(pull(dest).ok());
  EXPECT_GT(fake.stale_reads(), 0u);
  EXPECT_TRUE(std::all_of(dest, dest + bytes, [](uint8_t b) { return b == 0; }));

  // Forgotten, the next connection registers the new pages and the bytes land.
  const uint64_t registered = fake.registrations();
  const uint64_t stale = fake.stale_reads();
  pair.client->Forget(dest, bytes);
  ASSERT_TRUE(pull(dest).ok());
  EXPECT_EQ(fake.registrations(), registered + 1);
  EXPECT_EQ(fake.stale_reads(), stale);
  EXPECT_TRUE(std::equal(dest, dest + bytes, region.bytes().begin()));
  munmap(dest, bytes);
}

TEST(verbs_complete, PiecesAcrossMemoryRegionBoundariesAreSplit) {
  FakeNicConfig config;
  config.max_mr_size = 1 << 20;
  FakeVerbs fake(config);
  VerbsOptions options;
  options.max_read_bytes = 8 << 20;  // only the memory regions cut the reads
  VerbsPair pair;
  ASSERT_TRUE(pair.Open(fake.api(), options).ok());
  BufferRegion region(RandomBytes((7 << 19) + 1, 7));  // 3.5 MiB + 1: four MRs
  // The destination sits 300000 bytes into a buffer registered ahead, so the client's MR
  // boundaries fall elsewhere than the server's: a read must stop at both.
  std::vector<uint8_t> buffer(region.size() + 300000);
  ASSERT_TRUE(pair.client->Register(buffer.data(), buffer.size()).ok());
  uint8_t* dest = buffer.data() + 300000;
  std::unique_ptr<PiecePath> path;
  ASSERT_TRUE(pair.Connect(region, dest, region.size(), &path).ok());
  VerbsOffer offer;
  ASSERT_TRUE(ParseVerbsOffer(pair.server->Offer(region), &offer).ok());
  EXPECT_EQ(offer.segments.size(), 4u);
  FetchOutcome out = Fetch(path.get(), {{0, 3 << 19}, {3 << 19, region.size() - (3 << 19)}});
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_TRUE(std::equal(region.bytes().begin(), region.bytes().end(), dest));
  EXPECT_EQ(fake.reads_executed(), 8u) << "4 server MRs and 4 client MRs: 7 distinct cuts inside 3.5 MiB";
}

// Runs `pieces` through a verbs path that fails on the given fault, checks the hand-back
// contract and returns the outcome.
FetchOutcome FailingFetch(FakeVerbs& fake, VerbsPair& pair, BufferRegion& region, std::vector<uint8_t>& dest,
                          std::unique_ptr<PiecePath>& path, const std::vector<Piece>& pieces) {
  FetchOutcome out = Fetch(path.get(), pieces);
  EXPECT_EQ(out.status.code(), StatusCode::kUnavailable) << out.status.ToString();
  std::set<size_t> landed(out.landed.begin(), out.landed.end());
  EXPECT_EQ(landed.size(), out.landed.size()) << "each piece landed at most once";
  for (size_t i : out.left) EXPECT_FALSE(landed.count(i)) << "piece " << i << " both landed and handed back";
  EXPECT_EQ(landed.size() + out.left.size(), pieces.size()) << "every piece either landed or handed back";
  for (size_t i : landed) EXPECT_TRUE(PieceEquals(dest, region.bytes(), pieces[i])) << "landed piece " << i;
  for (uint32_t c : ClientQps(fake)) EXPECT_EQ(fake.qp(c).state, IBV_QPS_ERR);
  // Nothing is in flight any more: more polling moves no byte into dest.
  const uint64_t reads = fake.reads_executed();
  std::vector<uint8_t> snapshot = dest;
  FetchOutcome again = Fetch(path.get(), pieces);
  EXPECT_EQ(again.status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(again.left.size(), pieces.size()) << "a failed path hands everything back";
  EXPECT_TRUE(again.landed.empty());
  EXPECT_EQ(fake.reads_executed(), reads);
  EXPECT_EQ(dest, snapshot);
  (void)pair;
  return out;
}

TEST(verbs_error_completion, PathEndsAndHandsBackExactlyTheUnlandedPieces) {
  FakeVerbs fake;
  VerbsOptions options;
  options.max_read_bytes = 65536;
  VerbsPair pair;
  ASSERT_TRUE(pair.Open(fake.api(), options).ok());
  BufferRegion region(RandomBytes(4 << 20, 8));
  std::vector<uint8_t> dest(region.size());
  std::unique_ptr<PiecePath> path;
  ASSERT_TRUE(pair.Connect(region, dest.data(), dest.size(), &path).ok());
  fake.FailNthRead(20, IBV_WC_REM_ACCESS_ERR);
  std::vector<Piece> pieces = Pieces(dest.size(), 65536);
  FetchOutcome out = FailingFetch(fake, pair, region, dest, path, pieces);
  EXPECT_NE(out.status.message().find("remote access error"), std::string_view::npos) << out.status.ToString();
  EXPECT_GE(out.landed.size(), 19u) << "reads before the failure landed";
  EXPECT_LE(out.landed.size(), 23u) << "at most one more per QP in the same round";
  EXPECT_GT(out.left.size(), 40u);
}

TEST(verbs_error_completion, QpGoingToErrorFlushesAndHandsBack) {
  FakeVerbs fake;
  VerbsPair pair;
  ASSERT_TRUE(pair.Open(fake.api()).ok());
  BufferRegion region(RandomBytes(2 << 20, 9));
  std::vector<uint8_t> dest(region.size());
  std::unique_ptr<PiecePath> path;
  ASSERT_TRUE(pair.Connect(region, dest.data(), dest.size(), &path).ok());
  fake.BreakQpAfterReads(10);
  FetchOutcome out = FailingFetch(fake, pair, region, dest, path, Pieces(dest.size(), 32768));
  EXPECT_NE(out.status.message().find("Flushed"), std::string_view::npos) << out.status.ToString();
  EXPECT_GE(out.landed.size(), 10u) << "reads before the QP broke landed";
  EXPECT_LE(out.landed.size(), 13u) << "the other QPs may finish one more each in that round";
}

TEST(verbs_error_completion, SilentPathGivesUpAfterTheCompletionTimeout) {
  FakeVerbs fake;
  VerbsOptions options;
  options.completion_timeout = milliseconds(100);
  VerbsPair pair;
  ASSERT_TRUE(pair.Open(fake.api(), options).ok());
  BufferRegion region(RandomBytes(1 << 20, 10));
  std::vector<uint8_t> dest(region.size());
  std::unique_ptr<PiecePath> path;
  ASSERT_TRUE(pair.Connect(region, dest.data(), dest.size(), &path).ok());
  fake.HoldReads(true);
  auto start = std::chrono::steady_clock::now();
  FetchOutcome out = FailingFetch(fake, pair, region, dest, path, Pieces(dest.size(), 65536));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_NE(out.status.message().find("no completion"), std::string_view::npos) << out.status.ToString();
  EXPECT_TRUE(out.landed.empty());
}

TEST(verbs_error_completion, ServerDroppingAnOldConnectionEndsThatClientsPath) {
  FakeVerbs fake;
  VerbsOptions options;
  options.max_server_connections = 1;
  VerbsPair pair;
  ASSERT_TRUE(pair.Open(fake.api(), options).ok());
  BufferRegion region(RandomBytes(1 << 20, 12));
  std::vector<uint8_t> first(region.size()), second(region.size());
  std::unique_ptr<PiecePath> old_path, new_path;
  ASSERT_TRUE(pair.Connect(region, first.data(), first.size(), &old_path).ok());
  ASSERT_TRUE(pair.Connect(region, second.data(), second.size(), &new_path).ok());
  EXPECT_EQ(pair.server->connections(), 1u);
  FetchOutcome old_out = Fetch(old_path.get(), Pieces(region.size(), 65536));
  EXPECT_EQ(old_out.status.code(), StatusCode::kUnavailable);
  EXPECT_NE(old_out.status.message().find("retry counter exceeded"), std::string_view::npos)
      << old_out.status.ToString();
  EXPECT_EQ(old_out.left.size(), 16u);
  FetchOutcome new_out = Fetch(new_path.get(), Pieces(region.size(), 65536));
  ASSERT_TRUE(new_out.status.ok()) << new_out.status.ToString();
  EXPECT_EQ(second, region.bytes());
}

// An offer whose key or bounds no longer match the server's registration (the arena was
// re-registered since) is refused by the responder NIC: the path ends, nothing is lost.
TEST(verbs_error_completion, StaleRkeyOrBoundsAreRemoteAccessErrors) {
  for (int variant = 0; variant < 2; ++variant) {
    FakeVerbs fake;
    VerbsPair pair;
    ASSERT_TRUE(pair.Open(fake.api()).ok());
    BufferRegion region(RandomBytes(1 << 20, 14));
    VerbsOffer offer;
    ASSERT_TRUE(ParseVerbsOffer(pair.server->Offer(region), &offer).ok());
    if (variant == 0) {
      offer.segments[0].rkey += 1;
    } else {
      offer.segments[0].addr += 4096;  // reads run past the registered end
    }
    std::vector<uint8_t> dest(region.size());
    Exchange exchange = [&](std::string_view request, std::string* reply) {
      return pair.server->Accept(region, request, reply);
    };
    std::unique_ptr<PiecePath> path;
    ASSERT_TRUE(pair.client->Connect(EncodeVerbsOffer(offer), dest.data(), dest.size(), exchange, &path).ok());
    std::vector<Piece> pieces = Pieces(dest.size(), 65536);
    FetchOutcome out = Fetch(path.get(), pieces);
    EXPECT_EQ(out.status.code(), StatusCode::kUnavailable);
    EXPECT_NE(out.status.message().find("remote access error"), std::string_view::npos) << out.status.ToString();
    // With a bad key nothing lands; shifted, the read past the registered end is refused (what
    // lands before it is wrong bytes, which the engine's chunk verification rejects).
    if (variant == 0) {
      EXPECT_TRUE(out.landed.empty());
    } else {
      EXPECT_NE(std::find(out.left.begin(), out.left.end(), pieces.size() - 1), out.left.end());
    }
    EXPECT_FALSE(out.left.empty());
    EXPECT_EQ(out.landed.size() + out.left.size(), pieces.size());
  }
}

// What the engine does with a failing fast path, at this level: batches go over verbs until
// it fails; what it hands back, and every later batch, go over the other path (here a copy
// standing in for TCP); the result is the whole region, each piece delivered once.
TEST(verbs_error_completion, HandedBackPiecesFinishOverAnotherPath) {
  FakeVerbs fake;
  VerbsPair pair;
  ASSERT_TRUE(pair.Open(fake.api()).ok());
  BufferRegion region(RandomBytes(6 << 20, 13));
  std::vector<uint8_t> dest(region.size());
  std::unique_ptr<PiecePath> path;
  ASSERT_TRUE(pair.Connect(region, dest.data(), dest.size(), &path).ok());
  std::vector<Piece> pieces = Pieces(dest.size(), 128 << 10);
  fake.FailNthRead(20, IBV_WC_RETRY_EXC_ERR);  // 48 pieces, one read each
  std::vector<int> deliveries(pieces.size(), 0);
  uint64_t verbs_bytes = 0, tcp_bytes = 0;
  bool verbs_alive = true;
  for (size_t batch = 0; batch < pieces.size(); batch += 16) {
    std::vector<Piece> chunk(pieces.begin() + batch, pieces.begin() + std::min(pieces.size(), batch + 16));
    std::vector<size_t> left;
    if (verbs_alive) {
      Status s = path->Fetch(chunk, [&](size_t i) { ++deliveries[batch + i]; verbs_bytes += chunk[i].len; }, &left);
      verbs_alive = s.ok();
    } else {
      for (size_t i = 0; i < chunk.size(); ++i) left.push_back(i);
    }
    for (size_t i : left) {
      std::memcpy(dest.data() + chunk[i].offset, region.data() + chunk[i].offset, chunk[i].len);
      ++deliveries[batch + i];
      tcp_bytes += chunk[i].len;
    }
  }
  EXPECT_FALSE(verbs_alive);
  EXPECT_EQ(dest, region.bytes());
  for (size_t i = 0; i < pieces.size(); ++i) EXPECT_EQ(deliveries[i], 1) << "piece " << i;
  EXPECT_GE(verbs_bytes, 16u * (128 << 10)) << "the first batch went over verbs";
  EXPECT_GT(tcp_bytes, 0u);
  EXPECT_EQ(verbs_bytes + tcp_bytes, region.size());
}

}  // namespace
}  // namespace ft::rdma::testing
