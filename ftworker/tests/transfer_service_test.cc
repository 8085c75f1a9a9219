// The worker's transfer service inside the Daemon, driven by Tick() against an in-memory
// Redis (redis/fake/fake_store.h) with a fake server behind the TransferServer seam: it waits for
// the job's secret, starts the server with it, publishes the endpoint (again after Redis lost
// it), logs refusals and never the secret, removes the endpoint at a clean stop, and serves
// the arenas of ranks Redis records on its node even when it never saw their processes.
#include "ftworker/transfer/transfer_service.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "ftworker/daemon.h"
#include "ftworker/ckpt/tests/ckpt_test_util.h"
#include "ftworker/monitor/tests/test_util.h"
#include "proto/codec.h"
#include "proto/transfer_codec.h"
#include "redis/fake/fake_store.h"
#include "tests/util/log_capture.h"
#include "transfer_engine/verbs/tests/fake_verbs.h"
#include "transfer_engine/verbs/verbs_setup.h"

namespace ft::worker {
namespace {

using namespace ft::worker::testing;

constexpr uint64_t kTickNs = 10 * kMs;
const std::string kSecret(64, 'a');

// What the daemon did with its server, shared with the test.
struct ServerLog {
  std::vector<rdma::ServerOptions> made;
  std::vector<Status> start_results;  // consumed in order; then OK
  bool running = false;
  int stops = 0;
  rdma::ServerStats stats;
};

class FakeServer : public TransferServer {
 public:
  FakeServer(ServerLog* log) : log_(log) {}
  Status Start() override {
    Status s = Status::Ok();
    if (!log_->start_results.empty()) {
      s = log_->start_results.front();
      log_->start_results.erase(log_->start_results.begin());
    }
    log_->running = s.ok();
    return s;
  }
  uint16_t port() const override { return 45678; }
  void Stop() override {
    if (log_->running) ++log_->stops;
    log_->running = false;
  }
  rdma::ServerStats stats() const override { return log_->stats; }

 private:
  ServerLog* log_;
};

class TransferServiceTest : public ::testing::Test {
 protected:
  TransferServiceTest() : job_(UniqueJob("ts")), keys_(job_), monitor_(MonitorOptions(job_, &probe_)) {}

  void Start() {
    DaemonOptions o;
    o.job = job_;
    o.node = "n1";
    o.host = "host-n1";
    o.config = Config::Defaults();
    o.config.ckpt_arena_dir = arena_dir_.path();
    o.config.transfer_port = port_;
    o.listen_address = "10.1.2.3";
    o.fast_path = fast_path_;
    o.arena_mapped = arena_mapped_;
    o.arena_unmapped = arena_unmapped_;
    o.make_transfer_server = [this](const rdma::ServerOptions& so) {
      log_.made.push_back(so);
      return std::make_unique<FakeServer>(&log_);
    };
    auto store = std::make_unique<redis::FakeStore>(&server_, "worker");
    store_ = store.get();
    daemon_ = std::make_unique<Daemon>(o, &monitor_, std::move(store));
  }

  void TickFor(uint64_t ms) {
    for (uint64_t t = 0; t < ms * kMs; t += kTickNs) {
      now_ += kTickNs;
      server_.SetUnixMs(1'700'000'000'000 + static_cast<int64_t>((now_ - t0_) / kMs));
      daemon_->Tick(now_, server_.unix_ms());
    }
  }

  std::optional<proto::TransferEndpoint> Endpoint() {
    auto v = server_.HGet(keys_.Endpoints(), "n1");
    if (!v) return std::nullopt;
    proto::TransferEndpoint e;
    Status s = proto::Decode(*v, &e);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return e;
  }

  std::string job_;
  proto::Keys keys_;
  TempDir arena_dir_{"transfer"};
  FakeProbe probe_;
  NodeMonitor monitor_;
  redis::FakeRedis server_;
  redis::FakeStore* store_ = nullptr;
  std::unique_ptr<Daemon> daemon_;
  ServerLog log_;
  int64_t port_ = 0;
  rdma::FastPathServer* fast_path_ = nullptr;
  std::function<void(const uint8_t*, uint64_t)> arena_mapped_, arena_unmapped_;
  const uint64_t t0_ = MonoNs();
  uint64_t now_ = t0_;
};

TEST_F(TransferServiceTest, WaitsForTheSecretThenServesAndPublishesItsEndpoint) {
  test_util::LogCapture logs;
  port_ = 7000;
  Start();
  TickFor(2000);
  EXPECT_TRUE(log_.made.empty()) << "no server before the master wrote the secret";
  EXPECT_FALSE(daemon_->transfer().serving());
  EXPECT_FALSE(Endpoint().has_value());
  EXPECT_EQ(logs.Count({"waiting for the job's transfer secret"}), 1u) << logs.All();

  server_.Execute({"SET", keys_.TransferSecret(), kSecret});
  TickFor(1000);
  ASSERT_EQ(log_.made.size(), 1u);
  const rdma::ServerOptions& so = log_.made[0];
  EXPECT_EQ(so.secret, kSecret);
  EXPECT_EQ(so.listen_address, "10.1.2.3");
  EXPECT_EQ(so.port, 7000);
  EXPECT_NE(so.provider, nullptr);
  EXPECT_TRUE(log_.running);
  EXPECT_TRUE(daemon_->transfer().serving());
  auto e = Endpoint();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->node, "n1");
  EXPECT_EQ(e->address, "10.1.2.3");
  EXPECT_EQ(e->port, 45678);
  EXPECT_EQ(e->transports, std::vector<std::string>{"tcp"});
  EXPECT_GT(e->unix_ms, 0);
  EXPECT_EQ(logs.Count({"serving this node's checkpoint copies to peers on 10.1.2.3:45678 (tcp)"}), 1u) << logs.All();
  EXPECT_EQ(logs.All().find(kSecret), std::string::npos) << "the secret was logged";
}

TEST_F(TransferServiceTest, ABadSecretIsNotUsedNorLogged) {
  test_util::LogCapture logs;
  Start();
  const std::string bad = "not-a-secret-" + std::string(40, 'z');
  server_.Execute({"SET", keys_.TransferSecret(), bad});
  TickFor(3000);
  EXPECT_TRUE(log_.made.empty());
  EXPECT_EQ(logs.Count({"not 64 hex digits"}), 1u) << "warned once: " << logs.All();
  EXPECT_EQ(logs.All().find(bad), std::string::npos);
  server_.Execute({"SET", keys_.TransferSecret(), kSecret});
  TickFor(1000);
  ASSERT_EQ(log_.made.size(), 1u);
  EXPECT_EQ(log_.made[0].secret, kSecret);
}

TEST_F(TransferServiceTest, AFailedStartIsRetried) {
  test_util::LogCapture logs;
  log_.start_results = {Status::Unavailable("bind: Address already in use")};
  server_.Execute({"SET", keys_.TransferSecret(), kSecret});
  Start();
  TickFor(1000);
  EXPECT_EQ(log_.made.size(), 1u);
  EXPECT_FALSE(daemon_->transfer().serving());
  EXPECT_FALSE(Endpoint().has_value());
  EXPECT_EQ(logs.Count({"could not listen on 10.1.2.3:0", "Address already in use"}), 1u) << logs.All();
  TickFor(5500);
  EXPECT_EQ(log_.made.size(), 2u);
  EXPECT_TRUE(daemon_->transfer().serving());
  EXPECT_TRUE(Endpoint().has_value());
}

TEST_F(TransferServiceTest, APortOutOfRangeIsAnErrorNotARetryLoop) {
  test_util::LogCapture logs;
  port_ = 70000;
  server_.Execute({"SET", keys_.TransferSecret(), kSecret});
  Start();
  TickFor(12000);
  EXPECT_TRUE(log_.made.empty());
  EXPECT_EQ(logs.Count({"FT_TRANSFER_PORT=70000 is not a port"}), 1u) << logs.All();
}

TEST_F(TransferServiceTest, TheEndpointIsWrittenAgainAfterRedisLostItAndRemovedAtStop) {
  server_.Execute({"SET", keys_.TransferSecret(), kSecret});
  Start();
  TickFor(1000);
  ASSERT_TRUE(Endpoint().has_value());
  server_.FlushAll();
  TickFor(1500);
  EXPECT_TRUE(Endpoint().has_value()) << "written again after Redis lost its data";
  // Another value under this node's name (a stale worker's) is replaced by the live one.
  server_.Execute({"HSET", keys_.Endpoints(), "n1", "{\"v\":1}"});
  TickFor(1500);
  ASSERT_TRUE(Endpoint().has_value());
  EXPECT_EQ(Endpoint()->port, 45678);

  std::atomic<bool> stop{true};
  daemon_->Run(stop);
  EXPECT_EQ(log_.stops, 1);
  EXPECT_FALSE(server_.HGet(keys_.Endpoints(), "n1").has_value()) << "a clean stop removes the endpoint";
}

// Redis lost the secret and the master made a new one: the server is restarted with it, on the
// port peers know. A secret merely missing for a while changes nothing.
TEST_F(TransferServiceTest, ANewSecretRestartsTheServerOnItsPort) {
  test_util::LogCapture logs;
  server_.Execute({"SET", keys_.TransferSecret(), kSecret});
  Start();
  TickFor(1000);
  ASSERT_EQ(log_.made.size(), 1u);
  server_.FlushAll();
  TickFor(5000);
  EXPECT_EQ(log_.made.size(), 1u) << "no secret in Redis for a while: keep serving with the known one";
  EXPECT_TRUE(log_.running);
  const std::string fresh(64, 'b');
  server_.Execute({"SET", keys_.TransferSecret(), fresh});
  TickFor(2500);
  ASSERT_EQ(log_.made.size(), 2u);
  EXPECT_EQ(log_.stops, 1);
  EXPECT_TRUE(log_.running);
  EXPECT_EQ(log_.made[1].secret, fresh);
  EXPECT_EQ(log_.made[1].port, 45678) << "restarted on the port the endpoint names";
  EXPECT_EQ(logs.Count({"transfer secret", "changed: restarting the transfer server"}), 1u) << logs.All();
  EXPECT_EQ(logs.All().find(fresh), std::string::npos);
  ASSERT_TRUE(Endpoint().has_value());
  EXPECT_EQ(Endpoint()->port, 45678);
}

// The system gave the old port to another socket once the server closed it (a connection to
// Redis reconnecting after the outage that changed the secret): the server listens on another
// free port at once, not after the 5 s retry, and the endpoint names it.
TEST_F(TransferServiceTest, ARestartWhosePortWasTakenListensOnAnotherAtOnce) {
  test_util::LogCapture logs;
  server_.Execute({"SET", keys_.TransferSecret(), kSecret});
  Start();
  TickFor(1000);
  ASSERT_EQ(log_.made.size(), 1u);
  log_.start_results = {Status::Unavailable("bind: Address already in use")};
  server_.Execute({"SET", keys_.TransferSecret(), std::string(64, 'c')});
  TickFor(2500);
  ASSERT_EQ(log_.made.size(), 3u) << "the old port, then at once any free one";
  EXPECT_EQ(log_.made[1].port, 45678);
  EXPECT_EQ(log_.made[2].port, 0) << "FT_TRANSFER_PORT=0: a free port";
  EXPECT_TRUE(daemon_->transfer().serving());
  EXPECT_TRUE(Endpoint().has_value());
  EXPECT_EQ(logs.Count({"could not listen again on 10.1.2.3:45678", "Address already in use", "another port"}), 1u)
      << logs.All();
}

TEST_F(TransferServiceTest, RefusedPeersAreLogged) {
  test_util::LogCapture logs;
  server_.Execute({"SET", keys_.TransferSecret(), kSecret});
  Start();
  TickFor(1000);
  log_.stats.connections = 3;
  log_.stats.auth_refused = 2;
  TickFor(1500);
  EXPECT_EQ(logs.Count({"refused 2 connection(s)", "wrong or no transfer secret"}), 1u) << logs.All();
  log_.stats.auth_refused = 3;
  TickFor(1500);
  EXPECT_EQ(logs.Count({"refused 1 connection(s)"}), 1u) << logs.All();
}

// A node with a fast path (verbs) offers it to the server and names it first in its endpoint.
class FakeFastPath : public rdma::FastPathServer {
 public:
  const char* kind() const override { return "verbs"; }
  std::string Offer(const rdma::Region&) override { return "offer"; }
  Status Accept(const rdma::Region&, std::string_view, std::string*) override { return Status::Ok(); }
};

TEST_F(TransferServiceTest, AFastPathIsOfferedAndPublishedFirst) {
  FakeFastPath verbs;
  fast_path_ = &verbs;
  server_.Execute({"SET", keys_.TransferSecret(), kSecret});
  Start();
  TickFor(1000);
  ASSERT_EQ(log_.made.size(), 1u);
  EXPECT_EQ(log_.made[0].fast_path, &verbs);
  auto e = Endpoint();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->transports, (std::vector<std::string>{"verbs", "tcp"}));
}

// The real verbs server on the fake NIC (transfer_engine/verbs/tests/fake_verbs.h), wired as
// ftworker's main wires it: each arena the worker serves is registered once, when first mapped —
// before any peer asks — and offered to peers from that registration; the endpoint names verbs
// first.
TEST_F(TransferServiceTest, TheVerbsServerRegistersEachServedArenaOnceAheadOfAnyPeer) {
  rdma::testing::FakeVerbs nic;
  rdma::VerbsTransport verbs;
  Status opened = rdma::OpenVerbsTransport(Config::Defaults(), &nic.api(), &verbs);
  ASSERT_TRUE(opened.ok()) << opened.ToString();
  fast_path_ = verbs.server.get();
  int forgotten = 0;
  arena_mapped_ = [&](const uint8_t* data, uint64_t bytes) {
    Status r = verbs.server->Register(data, bytes);
    EXPECT_TRUE(r.ok()) << r.ToString();
  };
  arena_unmapped_ = [&](const uint8_t* data, uint64_t bytes) {
    verbs.server->Forget(data, bytes);
    ++forgotten;
  };
  FakeArena arena(arena_dir_.path(), job_, 3, 2 << 20);
  arena.Save(30, 0x30);
  proto::Membership m;
  m.rank = 3;
  m.node = "n1";
  m.host = "h";
  server_.Execute({"HSET", keys_.Ranks(), "3", proto::Encode(m)});
  server_.Execute({"SET", keys_.TransferSecret(), kSecret});
  Start();
  TickFor(2500);
  ASSERT_EQ(log_.made.size(), 1u);
  EXPECT_EQ(log_.made[0].fast_path, verbs.server.get());
  EXPECT_EQ(verbs.server->registrations(), 1u) << "registered when first mapped, before any request";
  auto e = Endpoint();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->transports, (std::vector<std::string>{"verbs", "tcp"}));
  std::shared_ptr<const rdma::Region> region;
  Status s = log_.made[0].provider->Open("arena/30/3", &region);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(verbs.server->Offer(*region).empty()) << "offered from the registration";
  EXPECT_EQ(verbs.server->registrations(), 1u) << "no registration on the restore path";
  region.reset();
  daemon_.reset();  // the worker stops: its mapping goes, and the NIC forgets the memory
  EXPECT_EQ(forgotten, 1);
}

// A worker restarted on a node whose ranks already exited never sees their segments; Redis
// still records them on this node, and their arenas are served. Another node's rank, whose
// arena sits in the same directory, is not.
TEST_F(TransferServiceTest, ServesTheArenasOfRanksRedisRecordsOnThisNode) {
  FakeArena mine(arena_dir_.path(), job_, 3, 1 << 20);
  FakeArena theirs(arena_dir_.path(), job_, 4, 1 << 20);
  mine.Save(20, 3);
  theirs.Save(20, 4);
  for (auto [rank, node] : {std::pair{3, "n1"}, std::pair{4, "n2"}}) {
    proto::Membership m;
    m.rank = rank;
    m.node = node;
    m.host = "h";
    m.state = "exited";
    server_.Execute({"HSET", keys_.Ranks(), std::to_string(rank), proto::Encode(m)});
  }
  server_.Execute({"SET", keys_.TransferSecret(), kSecret});
  Start();
  TickFor(2500);
  ASSERT_EQ(log_.made.size(), 1u);
  EXPECT_EQ(daemon_->transfer().RecordedRanks(), (std::set<int>{3}));
  rdma::RegionProvider* provider = log_.made[0].provider;
  std::shared_ptr<const rdma::Region> region;
  Status s = provider->Open("arena/20/3", &region);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(region->data()[0], 3);
  EXPECT_EQ(provider->Open("arena/20/4", &region).code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace ft::worker
