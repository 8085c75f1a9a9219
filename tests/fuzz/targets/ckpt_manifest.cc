// A checkpoint copy's manifest as a worker, a peer or a restarted rank reads it from an arena
// or a file (jitckpt/manifest.h, ParseManifest): hostile bytes give Ok or an explained error,
// never a read out of bounds or an allocation storm; what parses re-encodes to itself and is
// internally consistent. Mutations are mostly resealed (the trailing self-checksum), so the
// structural checks behind it are reached.
#include <cstring>

#include "jitckpt/checksum.h"
#include "jitckpt/manifest.h"
#include "jitckpt/tests/sample_manifest.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

void Reseal(std::string* bytes) {
  if (bytes->size() < 8) return;
  uint64_t sum = ft::ckpt::Checksum(bytes->data(), bytes->size() - 8);
  std::memcpy(bytes->data() + bytes->size() - 8, &sum, 8);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ft;
  using namespace ft::ckpt;
  std::vector<uint8_t> bytes(data, data + size);
  Manifest out;
  out.job = "sentinel";
  Status s = ParseManifest(bytes, &out);
  if (!s.ok()) {
    FT_FUZZ_CHECK(out.job == "sentinel", "output set on failure");
    fuzz::Refused(s);
    return 0;
  }
  Manifest again;
  Status r = ParseManifest(testing::Bytes(EncodeManifest(out)), &again);
  FT_FUZZ_CHECK(r.ok(), "what parsed does not parse again: " + r.ToString());
  FT_FUZZ_CHECK(again == out, "what parsed does not survive its round trip");
  FT_FUZZ_CHECK(out.chunk_checksums.size() == out.chunk_count(), "a checksum per chunk");
  fuzz::Accepted();
  return 0;
}

ft::fuzz::TargetInfo FuzzTargetInfo() {
  ft::fuzz::TargetInfo info;
  info.name = "ckpt_manifest";
  std::vector<uint8_t> data;
  std::vector<uint8_t> valid =
      ft::ckpt::testing::Bytes(ft::ckpt::EncodeManifest(ft::ckpt::testing::SampleManifest(&data, {5000, 4096, 123, 1, 70000})));
  info.seeds = {std::string(valid.begin(), valid.end())};
  info.mutate.hot_prefix = 96;  // the counts and sizes
  info.mutate.fixup = Reseal;
  info.mutate.fixup_per_8 = 7;
  info.random_max_bytes = 512;
  info.random_start = "FTCKMANI";
  info.random_rejected = true;
  info.mutations = 30000;
  info.min_accepted = 1;  // edits that leave the value valid (a byte set to itself, a name's letter)
  info.min_rejected = 20000;
  return info;
}
