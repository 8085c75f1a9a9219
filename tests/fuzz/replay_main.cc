// The corpus replayer: drives one fuzz target without libFuzzer, deterministically, in every
// `make test` — its seeds (each must parse), every file of the corpus folders it is given (the
// inputs that once broke a parser, tests/fuzz/regressions/<target>/), then --mutations inputs
// from tests/util/mutate.h's mutator and random bytes. An input that breaks the contract is
// saved (--save-failures, default the working directory) and named, so it can join the
// regressions folder; the run then aborts.
//
//   fuzz_<target>_replay [--corpus DIR]... [--mutations N] [--seed S] [--save-failures DIR]
//                        [--write-seeds DIR]
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/hash.h"
#include "tests/fuzz/fuzz_target.h"

namespace ft::fuzz {
extern void (*g_on_violation)();
}  // namespace ft::fuzz

namespace {

namespace fs = std::filesystem;

struct Current {
  std::string target;
  std::string source;  // "seed 3", "corpus <path>", "mutation 812 (seed 20261127)"
  const std::string* bytes = nullptr;
  std::string save_dir = ".";
} g_current;

void SaveAndName() {
  if (g_current.bytes == nullptr) return;
  const std::string& b = *g_current.bytes;
  std::fprintf(stderr, "fuzz: %s: the input was %s (%zu bytes):", g_current.target.c_str(), g_current.source.c_str(),
               b.size());
  for (size_t i = 0; i < std::min<size_t>(b.size(), 96); ++i) {
    std::fprintf(stderr, "%s%02x", i % 32 == 0 ? "\n  " : " ", static_cast<unsigned char>(b[i]));
  }
  std::fprintf(stderr, "%s\n", b.size() > 96 ? " ..." : "");
  char name[64];
  std::snprintf(name, sizeof(name), "failure-%016" PRIx64, ft::Fnv1a64(b));
  fs::path path = fs::path(g_current.save_dir) / (g_current.target + "-" + name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(b.data(), static_cast<std::streamsize>(b.size()));
  std::fprintf(stderr, "fuzz: saved as %s; once fixed, add it to tests/fuzz/regressions/%s/\n", path.c_str(),
               g_current.target.c_str());
}

void Run(const std::string& bytes, std::string source) {
  g_current.source = std::move(source);
  g_current.bytes = &bytes;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  g_current.bytes = nullptr;
}

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "fuzz replay: %s\nusage: fuzz_<target>_replay [--corpus DIR]... [--mutations N] [--seed S] "
               "[--save-failures DIR] [--write-seeds DIR]\n",
               why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ft::fuzz;
  TargetInfo info = FuzzTargetInfo();
  g_current.target = info.name;
  std::vector<std::string> corpora;
  std::string write_seeds;
  uint64_t seed = 20261127;
  long mutations = info.mutations;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Usage((arg + " needs a value").c_str());
      return argv[++i];
    };
    char* end = nullptr;
    if (arg == "--corpus") {
      corpora.push_back(value());
    } else if (arg == "--mutations") {
      std::string v = value();
      mutations = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || mutations < 0) Usage("--mutations takes a count");
    } else if (arg == "--seed") {
      std::string v = value();
      seed = std::strtoull(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0') Usage("--seed takes a number");
    } else if (arg == "--save-failures") {
      g_current.save_dir = value();
    } else if (arg == "--write-seeds") {
      write_seeds = value();
    } else {
      Usage(("unknown argument " + arg).c_str());
    }
  }
  if (!write_seeds.empty()) {
    fs::create_directories(write_seeds);
    for (size_t i = 0; i < info.seeds.size(); ++i) {
      std::ofstream out(fs::path(write_seeds) / ("seed-" + std::to_string(i)), std::ios::binary | std::ios::trunc);
      out.write(info.seeds[i].data(), static_cast<std::streamsize>(info.seeds[i].size()));
    }
    std::printf("fuzz %s: %zu seeds written to %s\n", info.name.c_str(), info.seeds.size(), write_seeds.c_str());
    return 0;
  }
  g_on_violation = SaveAndName;
  if (info.seeds.empty()) Usage("the target has no seeds");

  // Seeds: valid encodings, each accepted at least once (a multi-format target tries every
  // format on every input).
  for (size_t i = 0; i < info.seeds.size(); ++i) {
    const uint64_t before = AcceptedCount();
    Run(info.seeds[i], "seed " + std::to_string(i));
    if (AcceptedCount() == before) {
      std::fprintf(stderr, "fuzz %s: seed %zu was not accepted: the target or its seeds are wrong\n",
                   info.name.c_str(), i);
      return 1;
    }
  }
  // The regressions: inputs that once broke a parser, replayed as they are.
  size_t replayed = 0;
  for (const std::string& dir : corpora) {
    if (!fs::is_directory(dir)) Usage(("no corpus folder " + dir).c_str());
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.is_regular_file() && entry.path().filename() != "README.md") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      std::ifstream in(file, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      Run(bytes, "corpus " + file.string());
      ++replayed;
    }
  }
  // Mutations of the seeds, and random bytes one time in ten.
  const uint64_t accepted0 = AcceptedCount(), rejected0 = RejectedCount();
  ft::test_util::Mutator mutator(seed, info.mutate);
  for (long i = 0; i < mutations; ++i) {
    const bool random = i % 10 == 9;
    std::string bytes = random ? mutator.RandomBytes(info.random_max_bytes, info.random_start)
                               : mutator.Mutate(info.seeds[static_cast<size_t>(mutator.Below(info.seeds.size()))]);
    const uint64_t before = AcceptedCount();
    Run(bytes, (random ? "random input " : "mutation ") + std::to_string(i) + " (--seed " + std::to_string(seed) + ")");
    if (random && info.random_rejected && AcceptedCount() != before) {
      g_current.bytes = &bytes;
      std::fprintf(stderr, "fuzz %s: random bytes were accepted\n", info.name.c_str());
      SaveAndName();
      return 1;
    }
  }
  const uint64_t accepted = AcceptedCount() - accepted0, rejected = RejectedCount() - rejected0;
  std::printf("fuzz %s: %zu seeds, %zu regression inputs, %ld mutations (seed %" PRIu64 "): accepted %" PRIu64
              ", rejected %" PRIu64 "\n",
              info.name.c_str(), info.seeds.size(), replayed, mutations, seed, accepted, rejected);
  // Both outcomes, in the numbers the target asks for: a mutator that no longer reaches the
  // parser's checks, or a parser that stopped refusing, is a failed run, not a quiet one.
  if (mutations == info.mutations && (accepted < info.min_accepted || rejected < info.min_rejected)) {
    std::fprintf(stderr, "fuzz %s: expected at least %" PRIu64 " accepted and %" PRIu64 " rejected\n",
                 info.name.c_str(), info.min_accepted, info.min_rejected);
    return 1;
  }
  return 0;
}
