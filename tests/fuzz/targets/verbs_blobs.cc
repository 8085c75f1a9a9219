// The blobs two verbs peers exchange to connect (transfer_engine/verbs/verbs_blob.h: the offer, the
// connect request, the accept reply), read from the network: hostile bytes give Ok or an explained
// error with the output untouched; what parses re-encodes to the same value. Each input is
// tried as all three.
#include "tests/fuzz/fuzz_target.h"
#include "transfer_engine/verbs/tests/sample_verbs_blobs.h"
#include "transfer_engine/verbs/verbs_blob.h"

namespace {

using namespace ft;
using namespace ft::rdma;

template <typename T>
void ParseChecked(std::string_view bytes, Status (*parse)(std::string_view, T*), std::string (*encode)(const T&)) {
  T out;
  const T sentinel = out;
  Status s = parse(bytes, &out);
  if (!s.ok()) {
    FT_FUZZ_CHECK(out == sentinel, "output set on failure");
    fuzz::Refused(s);
    return;
  }
  T again;
  Status r = parse(encode(out), &again);
  FT_FUZZ_CHECK(r.ok(), "what parsed does not parse again: " + r.ToString());
  FT_FUZZ_CHECK(again == out, "what parsed does not survive its round trip");
  fuzz::Accepted();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  ParseChecked<VerbsOffer>(bytes, &ParseVerbsOffer, &EncodeVerbsOffer);
  ParseChecked<VerbsConnectRequest>(bytes, &ParseVerbsConnectRequest, &EncodeVerbsConnectRequest);
  ParseChecked<VerbsAcceptReply>(bytes, &ParseVerbsAcceptReply, &EncodeVerbsAcceptReply);
  return 0;
}

ft::fuzz::TargetInfo FuzzTargetInfo() {
  using namespace ft::rdma::testing;
  ft::fuzz::TargetInfo info;
  info.name = "verbs_blobs";
  info.seeds = {EncodeVerbsOffer(SampleOffer()), EncodeVerbsConnectRequest(SampleRequest()),
                EncodeVerbsAcceptReply(SampleReply())};
  info.mutate.hot_prefix = 16;
  info.mutate.max_edits = 3;
  info.random_max_bytes = 200;
  info.random_rejected = true;
  info.mutations = 60000;
  info.min_accepted = 100;  // mutations of values (a key, a qp number) still parse
  info.min_rejected = 90000;
  return info;
}
