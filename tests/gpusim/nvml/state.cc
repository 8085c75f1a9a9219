// The state file: parsing and re-reading it when it changes.
#include "state.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace gpusim::nvml {
namespace {

// One line's keyword, its argument names (for the message) and how many numbers follow.
struct Syntax {
  const char* keyword;
  const char* args;
  int nargs;
};
constexpr Syntax kSyntax[] = {
    {"xid", "<gpu> <xid>", 2},
    {"ecc", "<gpu> <count>", 2},
    {"remap", "<gpu> <failure 0|1> <pending 0|1>", 3},
    {"retired", "<gpu> <count>", 2},
    {"throttle", "<gpu> <mask>", 2},
    {"nvlink", "<gpu> <link> <crc> <replay> <recovery>", 5},
    {"pcie-replay", "<gpu> <count>", 2},
    {"lost", "<gpu>", 1},
};

// Whole token as an unsigned number (decimal, or 0x hex for masks).
bool ParseNumber(const std::string& token, unsigned long long* out) {
  if (token.empty() || token[0] == '-' || token[0] == '+') return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = strtoull(token.c_str(), &end, 0);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

// Applies one tokenized line; nullptr on success, else why it is malformed.
const char* Apply(const Syntax& s, const unsigned long long* a, Health* h) {
  if (a[0] >= kMaxGpus) return "the GPU index is not in [0, 64)";
  const int gpu = static_cast<int>(a[0]);
  GpuHealth& g = h->gpus[gpu];
  const std::string_view kw = s.keyword;
  if (kw == "xid") {
    h->xids.push_back({gpu, a[1]});
  } else if (kw == "ecc") {
    g.ecc_uncorrected = a[1];
  } else if (kw == "remap") {
    if (a[1] > 1 || a[2] > 1) return "failure and pending are 0 or 1";
    g.remap_failure = a[1] == 1;
    g.remap_pending = a[2] == 1;
  } else if (kw == "retired") {
    if (a[1] > 0xffffffffull) return "the count does not fit in 32 bits";
    g.retired_pages = static_cast<unsigned int>(a[1]);
  } else if (kw == "throttle") {
    g.throttle = a[1];
  } else if (kw == "nvlink") {
    if (a[1] >= kLinks) return "the link is not in [0, 18)";
    for (int c = 0; c < 3; ++c) g.nvlink[a[1]][c] = a[2 + c];
  } else if (kw == "pcie-replay") {
    if (a[1] > 0xffffffffull) return "the count does not fit in 32 bits";
    g.pcie_replay = static_cast<unsigned int>(a[1]);
  } else if (kw == "lost") {
    g.lost = true;
  }
  return nullptr;
}

const char* ParseLine(const std::string& line, Health* h) {
  std::istringstream in(line);
  std::string keyword;
  in >> keyword;
  for (const Syntax& s : kSyntax) {
    if (keyword != s.keyword) continue;
    unsigned long long a[5] = {};
    std::string token;
    int n = 0;
    while (in >> token) {
      if (n == s.nargs || !ParseNumber(token, &a[n])) return s.args;
      ++n;
    }
    if (n != s.nargs) return s.args;
    return Apply(s, a, h);
  }
  return "an unknown keyword (xid, ecc, remap, retired, throttle, nvlink, pcie-replay, lost)";
}

FileKey Stat(const std::string& path) {
  FileKey k;
  struct stat st;
  if (path.empty() || stat(path.c_str(), &st) != 0) return k;
  k.present = true;
  k.dev = st.st_dev;
  k.ino = st.st_ino;
  k.size = st.st_size;
  k.mtime_s = st.st_mtim.tv_sec;
  k.mtime_ns = st.st_mtim.tv_nsec;
  return k;
}

}  // namespace

Health ParseHealth(std::string_view text, const char* path) {
  Health h;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::string body = line.substr(0, line.find('#'));
    if (body.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (const char* why = ParseLine(body, &h)) {
      fprintf(stderr, "gpusim-nvml: %s:%d: skipped malformed line \"%s\": expected %s\n", path,
              number, line.c_str(), why);
    }
  }
  return h;
}

std::mutex& Mu() {
  static auto* mu = new std::mutex;  // leaked: callers may run during static destruction
  return *mu;
}

Library& Lib() {
  static auto* lib = new Library;
  return *lib;
}

void Refresh() {
  Library& lib = Lib();
  FileKey key = Stat(lib.state_path);
  if (key == lib.key) return;
  lib.key = key;
  std::string text;
  if (key.present) {
    std::ifstream f(lib.state_path);
    std::stringstream buf;
    buf << f.rdbuf();
    text = buf.str();
  }
  lib.health = ParseHealth(text, lib.state_path.c_str());
}

nvmlDevice_t Handle(int gpu) {
  static nvmlDevice_st* handles = [] {
    auto* h = new nvmlDevice_st[kMaxGpus];  // leaked, like Mu()
    for (int i = 0; i < kMaxGpus; ++i) h[i].index = i;
    return h;
  }();
  return &handles[gpu];
}

nvmlReturn_t CheckDevice(nvmlDevice_t device, int* gpu) {
  Library& lib = Lib();
  if (lib.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // Compare addresses, never dereference: a stranger's pointer must not crash us.
  int found = -1;
  for (int i = 0; i < lib.device_count; ++i) {
    if (Handle(i) == device) found = i;
  }
  if (found < 0) return NVML_ERROR_INVALID_ARGUMENT;
  Refresh();
  if (lib.health.gpus[found].lost) return NVML_ERROR_GPU_IS_LOST;
  *gpu = found;
  return NVML_SUCCESS;
}

}  // namespace gpusim::nvml
