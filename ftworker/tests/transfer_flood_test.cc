// A real ftworker whose transfer port is flooded with connections that never authenticate (a
// scanner, a misconfigured job, an attacker on the cluster network): the worker runs with a
// modest descriptor limit, and while hundreds of connections a second knock it must still open
// its files (a new arena is found and reported), talk to Redis (its endpoint, removed, is
// written again) and serve a peer of the job from another address.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <sstream>
#include <thread>

#include "ftworker/ckpt/tests/ckpt_test_util.h"
#include "ftworker/monitor/tests/test_util.h"
#include "jitckpt/checksum.h"
#include "proto/ckpt_codec.h"
#include "proto/codec.h"
#include "proto/keys.h"
#include "proto/transfer_codec.h"
#include "redis/client.h"
#include "redis/tests/redis_test.h"
#include "transfer_engine/transfer.h"

namespace ft::worker {
namespace {

using namespace ft::worker::testing;
using namespace std::chrono_literals;

constexpr rlim_t kWorkerDescriptors = 256;

// ftworker in its own process with RLIMIT_NOFILE = kWorkerDescriptors; killed at the end.
class LimitedWorker {
 public:
  LimitedWorker(const std::string& log_path, const std::vector<std::string>& env,
                const std::vector<std::string>& args) {
    pid_ = fork();
    if (pid_ == 0) {
      int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(fd, 1);
      dup2(fd, 2);
      rlimit limit{kWorkerDescriptors, kWorkerDescriptors};
      setrlimit(RLIMIT_NOFILE, &limit);
      for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> argv{const_cast<char*>(FTWORKER_BIN)};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(FTWORKER_BIN, argv.data());
      _exit(127);
    }
  }
  ~LimitedWorker() {
    ::kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  int Descriptors() const {
    DIR* d = opendir(("/proc/" + std::to_string(pid_) + "/fd").c_str());
    if (d == nullptr) return -1;
    int n = 0;
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.' ? 1 : 0;
    closedir(d);
    return n;
  }

 private:
  int pid_ = -1;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Opens connections from 127.0.0.2 to the port as fast as it can, up to `rate` a second, and
// holds each open until `hold` newer ones exist; never sends a byte.
class Flood {
 public:
  Flood(uint16_t port, int rate, size_t hold) {
    thread_ = std::thread([=, this] {
      std::deque<int> open;
      auto next = std::chrono::steady_clock::now();
      while (!stop_) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        sockaddr_in src{};
        src.sin_family = AF_INET;
        inet_pton(AF_INET, "127.0.0.2", &src.sin_addr);
        sockaddr_in dst{};
        dst.sin_family = AF_INET;
        dst.sin_port = htons(port);
        dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof(src)) == 0) {
          (void)connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof(dst));
          open.push_back(fd);
          ++opened_;
        } else if (fd >= 0) {
          close(fd);
        }
        while (open.size() > hold) {
          close(open.front());
          open.pop_front();
        }
        next += std::chrono::microseconds(1000000 / rate);
        std::this_thread::sleep_until(next);
      }
      for (int fd : open) close(fd);
    });
  }
  ~Flood() {
    stop_ = true;
    thread_.join();
  }
  uint64_t opened() const { return opened_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> opened_{0};
  std::thread thread_;
};

class TransferFloodTest : public redis::testing::RedisClientTest {};

TEST_F(TransferFloodTest, AFloodedWorkerStillOpensItsFilesTalksToRedisAndServesItsPeers) {
  redis::testing::RedisServer& server = server_;
  redis::Client& client = client_;
  const std::string job = UniqueJob("flood");
  const proto::Keys keys(job);
  TempDir tmp("flood");
  const std::string arena_dir = tmp.Sub("shm");
  auto run = [&](std::vector<std::string> argv) {
    redis::Reply r;
    Status s = client.Run(argv, &r);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return r;
  };
  const std::string secret(64, 'c');
  run({"SET", keys.TransferSecret(), secret});
  for (int rank : {0, 1}) {
    proto::Membership m;
    m.rank = rank;
    m.node = "node0";
    m.state = "exited";
    run({"HSET", keys.Ranks(), std::to_string(rank), proto::Encode(m)});
  }
  FakeArena rank0(arena_dir, job, 0, (4u << 20) + 300);
  const ckpt::Manifest m0 = rank0.Save(30, 0x30);

  const std::string log = tmp.path() + "/node0.log";
  LimitedWorker worker(log,
                       {"FT_REDIS_PASSWORD=" + server.password(), "FT_LISTEN=127.0.0.1", "FT_LOG_LEVEL=info",
                        "FT_CKPT_ARENA_DIR=" + arena_dir},
                       {"--job", job, "--node", "node0", "--redis", server.url()});
  auto reported = [&](int64_t step, int rank) {
    redis::Reply r = run({"HGET", keys.CkptStep(step), std::to_string(rank)});
    return r.is_string();
  };
  auto wait_for = [](auto done, std::chrono::seconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
    return done();
  };
  ASSERT_TRUE(wait_for([&] { return run({"HGET", keys.Endpoints(), "node0"}).is_string() && reported(30, 0); }, 30s))
      << ReadFile(log);
  proto::TransferEndpoint endpoint;
  ASSERT_TRUE(proto::Decode(run({"HGET", keys.Endpoints(), "node0"}).str(), &endpoint).ok());

  // About 400 connections a second, each held for 5 s by the flood (the server's handshake
  // deadline): without caps that is ~2000 descriptors wanted by a worker allowed 256.
  Flood flood(endpoint.port, 400, 2000);
  const auto flood_start = std::chrono::steady_clock::now();
  int most = 0;
  auto sample = [&] {
    most = std::max(most, worker.Descriptors());
  };
  // Let it build up past what a worker without caps could hold.
  while (std::chrono::steady_clock::now() - flood_start < 3s) {
    sample();
    std::this_thread::sleep_for(50ms);
  }

  // Its files: a new arena of rank 1 is found, opened and reported.
  FakeArena rank1(arena_dir, job, 1, (4u << 20) + 300);
  rank1.Save(31, 0x31);
  EXPECT_TRUE(wait_for([&] { sample(); return reported(31, 1); }, 20s))
      << "the flooded worker never reported rank 1's new arena\n" << ReadFile(log);
  // Redis: its endpoint, removed, is written again.
  run({"HDEL", keys.Endpoints(), "node0"});
  EXPECT_TRUE(wait_for([&] { sample(); return run({"HGET", keys.Endpoints(), "node0"}).is_string(); }, 20s))
      << ReadFile(log);
  // A peer of the job (another address than the flood's) pulls rank 0's copy.
  rdma::PullOptions options;
  options.secret = secret;
  options.connections = 2;
  const rdma::Peer peer{"node0", "127.0.0.1", endpoint.port};
  rdma::RegionInfo info;
  Status s = rdma::Stat(options, peer, "arena/30/0", &info);
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << ReadFile(log);
  std::vector<uint8_t> dest(info.size);
  rdma::PullRequest request;
  request.sources = {{peer, "arena/30/0"}};
  request.dest = dest.data();
  request.bytes = info.size;
  request.chunk_bytes = m0.chunk_bytes;
  request.verify = [&](uint64_t i, const uint8_t* data, uint64_t len) {
    return ckpt::Checksum(data, len) == m0.chunk_checksums[i];
  };
  rdma::PullResult result;
  s = rdma::Pull(options, request, &result);
  EXPECT_TRUE(s.ok()) << s.ToString();
  sample();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - flood_start).count();
  std::printf("RESULT transfer_flood connections=%llu seconds=%.1f rate=%.0f worker_fd_limit=%llu "
              "worker_fds_max=%d\n",
              static_cast<unsigned long long>(flood.opened()), seconds, flood.opened() / seconds,
              static_cast<unsigned long long>(kWorkerDescriptors), most);
  EXPECT_GT(flood.opened(), 1000u) << "the flood was not one";
  EXPECT_LT(most, static_cast<int>(kWorkerDescriptors) - 32) << "the flood took the worker's descriptors";
}

}  // namespace
}  // namespace ft::worker
