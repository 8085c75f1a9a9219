// The serving side of `make bench-pull`, run as its own process (`pull_bench serve ...`, started
// by the measuring side): it holds the bytes as a worker holds a committed arena copy and serves
// them two ways from the same memory: rdma::Server (the engine, TCP only: no RDMA device here)
// and the plain socket sender (the baseline).
//
// Protocol with the parent: the first line on stdin is the job's transfer secret; when ready the
// process prints one line `ready engine_port=P socket_port=Q region=NAME fill_s=S`; it serves
// until stdin closes (the parent is done or gone), then stops and exits 0.
#ifndef FT_BENCH_PULL_BENCH_SERVER_H_
#define FT_BENCH_PULL_BENCH_SERVER_H_

#include <cstdint>
#include <string>

namespace ft::bench {

inline constexpr const char* kRegionName = "arena/100/0";  // "arena/<step>/<rank>", as ftworker names copies

struct ServeOptions {
  std::string address = "127.0.0.1";
  uint64_t bytes = 2ull << 30;
  uint64_t chunk_bytes = 4ull << 20;  // the manifest's chunk: the unit the client verifies
  int io_threads = 2;                 // rdma::ServerOptions::io_threads
};

// The server process's main. Returns the exit code.
int RunServer(const ServeOptions& options);

}  // namespace ft::bench

#endif  // FT_BENCH_PULL_BENCH_SERVER_H_
