// A program with neither CUDA nor NCCL linked runs under LD_PRELOAD=libft.so; then it
// dlopen()s (RTLD_LOCAL) a library using only the runtime, then one using NCCL: libft.so
// resolves the real functions at their first call (a library loaded RTLD_LOCAL is found by its
// soname), and the NCCL ops show up in this process's segment.
//   preload_late_load_test <cuda-only lib> <nccl lib>
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "shm/comm_table.h"
#include "shm/segment.h"

namespace {

int Fail(const char* what) {
  std::fprintf(stderr, "FAIL: %s\n", what);
  return 1;
}

int RunFrom(const char* path) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return -1;
  }
  auto run = reinterpret_cast<int (*)()>(dlsym(lib, "ft_late_run"));
  return run == nullptr ? -1 : run();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return Fail("usage: preload_late_load_test <cuda-only lib> <nccl lib>");
  std::string name = ft::shm::SegmentName("preload_late_load_test", -1, getpid());
  std::unique_ptr<ft::shm::Segment> segment;
  if (ft::shm::Segment::Attach(name, &segment).ok()) return Fail("a segment before any CUDA call");
  if (int rc = RunFrom(argv[1]); rc != 0) {
    std::fprintf(stderr, "cuda-only library returned %d\n", rc);
    return Fail("runtime calls through libft.so after dlopen");
  }
  if (!ft::shm::Segment::Attach(name, &segment).ok()) return Fail("no segment after CUDA calls");
  if (segment->header()->call_count.load() < 3) return Fail("CUDA calls were not intercepted");
  if (int rc = RunFrom(argv[2]); rc != 0) {
    std::fprintf(stderr, "nccl library returned %d\n", rc);
    return Fail("NCCL calls through libft.so after dlopen");
  }
  for (int i = 0; i < 500; ++i) {
    for (uint32_t s = 0; s < segment->header()->comm_slot_count; ++s) {
      auto p = ft::shm::SnapshotCommSlot(*segment, s);
      if (p && p->entered_seq == 2 && p->completed_seq == 2) {
        std::printf("OK: late-loaded runtime and NCCL intercepted; comm %016llx completed 2\n",
                    static_cast<unsigned long long>(p->comm_id));
        return 0;
      }
    }
    struct timespec ts{0, 10000000};
    nanosleep(&ts, nullptr);
  }
  return Fail("the late-loaded NCCL's collectives never completed in the in-flight table");
}
