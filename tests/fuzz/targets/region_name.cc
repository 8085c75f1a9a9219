// The region names a pulling peer asks a worker's transfer server for (ftworker/transfer/region_name.h,
// ParseRegionName), from the network: a name is refused with InvalidArgument, quoting it bounded
// and leaving the output untouched, or it is exactly the name of what it parses to (one name per
// copy: arena/, local/ and replica/ places, plain decimals).
#include "ftworker/transfer/region_name.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ft;
  using namespace ft::worker;
  const std::string name(reinterpret_cast<const char*>(data), size);
  const RegionName sentinel{CopyPlace::kLocal, -7, -7};
  RegionName out = sentinel;
  Status s = ParseRegionName(name, &out);
  if (!s.ok()) {
    // Not a format's corruption but a bad request: InvalidArgument is this parser's contract.
    FT_FUZZ_CHECK(s.code() == StatusCode::kInvalidArgument, "unexpected code: " + s.ToString());
    FT_FUZZ_CHECK(!s.message().empty() && s.message().size() < 200, "the name must be quoted bounded");
    FT_FUZZ_CHECK(out == sentinel, "output set on failure");
    fuzz::Rejected();
    return 0;
  }
  FT_FUZZ_CHECK(FormatRegionName(out.place, out.step, out.rank) == name, "a copy has exactly one name");
  fuzz::Accepted();
  return 0;
}

ft::fuzz::TargetInfo FuzzTargetInfo() {
  using ft::worker::CopyPlace;
  using ft::worker::FormatRegionName;
  ft::fuzz::TargetInfo info;
  info.name = "region_name";
  info.seeds = {FormatRegionName(CopyPlace::kArena, 1200, 3), FormatRegionName(CopyPlace::kLocal, 7, 0),
                FormatRegionName(CopyPlace::kReplica, 99999, 63), FormatRegionName(CopyPlace::kArena, 0, 12)};
  info.mutate.tokens = {"arena/", "local/", "replica/", "/", "0", "1", "9", "-", "+", " ", "x",
                        std::string(1, '\0'), "\xff", "9223372036854775808", "2147483648"};
  info.mutate.max_edits = 3;
  info.random_max_bytes = 40;
  info.random_start = "arena/";
  info.mutations = 50000;
  info.min_accepted = 1000;  // a digit for a digit keeps a valid name
  info.min_rejected = 20000;
  return info;
}
