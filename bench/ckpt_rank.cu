// ckpt_bench_rank: one rank of `make bench-ckpt` (ckpt_bench.py). Host code only, built by
// nvcc against the real CUDA headers like trainsim; run on gpusim (or a GPU) under
// LD_PRELOAD=libft.so. It holds --bytes of device state in --buffers cudaMalloc'd buffers with
// a known pattern and uses ft.h as an application does.
//
//   --mode save     register, ft_register_end (timed), --steps ft_step_done calls (each timed:
//                   with FT_CKPT_EVERY=1 each is a periodic save, and the time is what it
//                   blocks the app; --gap-ms apart, the app's own work), print "ready", then stay alive until stdin closes while
//                   the bench posts just-in-time saves to its segment as ftworker does.
//   --mode restore  register the same layout over zeroed buffers, ft_restore (timed), then
//                   check every byte is the pattern again.
//   --mode train    a training loop on its own stream, --steps steps: the step's compute
//                   (--compute-ms of CPU work in a host function on the stream: on gpusim it
//                   competes with the agent's copy and checksums for the cores as the bench
//                   means it to), ft_update_begin(stream), the "optimizer" (cudaMemsetAsync of
//                   every registered byte), a stream sync, ft_step_done (timed). Prints
//                   step_done_ms= per step and step_s= (median seconds per step after the first
//                   two). With FT_CKPT_EVERY=1 every step is a snapshot that never blocks.
//
// Output lines (key=value) are parsed by ckpt_bench.py. Exit 1 on any failure, with why.
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define FT_WEAK_IMPORT
#include <ft/ft.h>

namespace {

double NowS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "ckpt_bench_rank: %s\n", what.c_str());
  std::fflush(stdout);
  _exit(1);
}

void Cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) Fail(std::string(what) + ": " + cudaGetErrorString(e));
}

void Ft(int r, const char* what) {
  if (r != FT_OK) Fail(std::string(what) + ": " + ft_result_string(r) + ": " + ft_last_error());
}

// The pattern: 64-bit words that depend on the buffer and the offset (a restore into the wrong
// buffer or at the wrong offset cannot pass).
void Pattern(int buffer, uint64_t first_word, uint64_t* out, size_t words) {
  for (size_t i = 0; i < words; ++i) {
    uint64_t x = (first_word + i) * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(buffer) << 56);
    out[i] = x ^ (x >> 29);
  }
}

constexpr size_t kStage = 64ull << 20;

// The step's compute: CPU work on the stream's worker (gpusim runs host functions there).
void Burn(void* ms) {
  const double until = NowS() + *static_cast<double*>(ms) / 1000.0;
  volatile uint64_t x = 1;
  while (NowS() < until) {
    for (int i = 0; i < 10000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode;
  uint64_t bytes = 1ull << 30;
  int buffers = 8;
  int steps = 5;
  int gap_ms = 1000;  // between steps: the app's own work, in which a periodic save completes
  double compute_ms = 200;  // train: each step's compute
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--mode") mode = argv[i + 1];
    else if (a == "--bytes") bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--buffers") buffers = std::atoi(argv[i + 1]);
    else if (a == "--steps") steps = std::atoi(argv[i + 1]);
    else if (a == "--gap-ms") gap_ms = std::atoi(argv[i + 1]);
    else if (a == "--compute-ms") compute_ms = std::atof(argv[i + 1]);
    else Fail("unknown flag " + a);
  }
  if ((mode != "save" && mode != "restore" && mode != "train") || buffers < 1 || bytes % (8ull * buffers) != 0) {
    Fail("usage: ckpt_bench_rank --mode save|restore|train [--bytes N (multiple of 8*buffers)] [--buffers K] "
         "[--steps S] [--compute-ms C]");
  }
  if (!ft_available()) Fail("libft.so is not loaded (run under LD_PRELOAD=libft.so)");
  const uint64_t per = bytes / buffers;

  std::vector<void*> dev(buffers);
  std::vector<uint64_t> stage(kStage / 8);
  for (int b = 0; b < buffers; ++b) {
    Cuda(cudaMalloc(&dev[b], per), "cudaMalloc");
    if (mode == "restore") {
      Cuda(cudaMemset(dev[b], 0, per), "cudaMemset");
      continue;
    }
    for (uint64_t off = 0; off < per; off += kStage) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kStage, per - off));
      Pattern(b, off / 8, stage.data(), n / 8);
      Cuda(cudaMemcpy(static_cast<char*>(dev[b]) + off, stage.data(), n, cudaMemcpyHostToDevice), "cudaMemcpy");
    }
  }
  // cudaMemset and cudaMemcpy may return before the device is done; the state must be complete
  // before ft copies it from (or, restoring, to) the device on its own non-blocking stream,
  // which is not ordered after the legacy default stream.
  Cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  for (int b = 0; b < buffers; ++b) {
    Ft(ft_register(("state." + std::to_string(b)).c_str(), dev[b], per), "ft_register");
  }
  double t0 = NowS();
  Ft(ft_register_end(), "ft_register_end");
  std::printf("register_s=%.4f bytes=%llu\n", NowS() - t0, static_cast<unsigned long long>(bytes));

  if (mode == "train") {
    cudaStream_t stream;
    Cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    std::vector<double> step_s, done_ms;
    double last = NowS();
    for (int s = 1; s <= steps; ++s) {
      Cuda(cudaLaunchHostFunc(stream, Burn, &compute_ms), "cudaLaunchHostFunc");
      Ft(ft_update_begin(stream), "ft_update_begin");
      for (int b = 0; b < buffers; ++b) Cuda(cudaMemsetAsync(dev[b], s & 0xff, per, stream), "cudaMemsetAsync");
      Cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      t0 = NowS();
      Ft(ft_step_done(s), "ft_step_done");
      const double now = NowS();
      done_ms.push_back((now - t0) * 1e3);
      step_s.push_back(now - last);
      last = now;
      std::printf("step_done_ms=%.4f step=%d\n", done_ms.back(), s);
    }
    // The first steps pay the first-touch of both arena slots and the agent's stream setup.
    std::vector<double> steady(step_s.begin() + std::min<size_t>(2, step_s.size() - 1), step_s.end());
    std::sort(steady.begin(), steady.end());
    std::printf("step_s=%.4f steps=%d\n", steady[steady.size() / 2], steps);
    Cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    return 0;
  }

  if (mode == "save") {
    for (int s = 1; s <= steps; ++s) {
      if (s > 1) usleep(static_cast<useconds_t>(gap_ms) * 1000);
      t0 = NowS();
      Ft(ft_step_done(s), "ft_step_done");
      std::printf("block_s=%.4f step=%d\n", NowS() - t0, s);
    }
    std::printf("ready pid=%d\n", static_cast<int>(getpid()));
    std::fflush(stdout);
    char buf[256];
    while (read(0, buf, sizeof(buf)) > 0) {
    }
    return 0;
  }

  int64_t step = -1;
  t0 = NowS();
  Ft(ft_restore(&step), "ft_restore");
  const double restore_s = NowS() - t0;
  for (int b = 0; b < buffers; ++b) {
    std::vector<uint64_t> expect(kStage / 8);
    for (uint64_t off = 0; off < per; off += kStage) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kStage, per - off));
      Cuda(cudaMemcpy(stage.data(), static_cast<char*>(dev[b]) + off, n, cudaMemcpyDeviceToHost), "cudaMemcpy");
      Pattern(b, off / 8, expect.data(), n / 8);
      if (std::memcmp(stage.data(), expect.data(), n) != 0) {
        size_t w = 0;
        while (stage[w] == expect[w]) ++w;
        char what[160];
        std::snprintf(what, sizeof(what), "buffer %d differs from the saved pattern at byte %llu: %016llx, expected %016llx",
                      b, static_cast<unsigned long long>(off + 8 * w), static_cast<unsigned long long>(stage[w]),
                      static_cast<unsigned long long>(expect[w]));
        Fail(what);
      }
    }
  }
  std::printf("restore_s=%.4f step=%lld verified=1\n", restore_s, static_cast<long long>(step));
  return 0;
}
