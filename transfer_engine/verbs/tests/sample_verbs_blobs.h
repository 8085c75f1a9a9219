// One offer, connect request and accept reply blob with every field set, shared by the blobs'
// tests and their fuzz target.
#ifndef FT_TRANSFER_ENGINE_VERBS_TESTS_SAMPLE_VERBS_BLOBS_H_
#define FT_TRANSFER_ENGINE_VERBS_TESTS_SAMPLE_VERBS_BLOBS_H_

#include <infiniband/verbs.h>

#include "transfer_engine/verbs/verbs_blob.h"

namespace ft::rdma::testing {

inline VerbsPortAddress SampleAddress() {
  VerbsPortAddress a;
  a.lid = 0x1234;
  for (int i = 0; i < 16; ++i) a.gid[i] = static_cast<uint8_t>(0xa0 + i);
  a.use_gid = 1;
  a.gid_index = 3;
  a.link_layer = IBV_LINK_LAYER_ETHERNET;
  a.port = 1;
  a.mtu = IBV_MTU_4096;
  return a;
}

inline VerbsOffer SampleOffer() {
  VerbsOffer o;
  o.region_bytes = 10000;
  o.address = SampleAddress();
  o.segments = {{0, 4096, 0x7f0000001000, 0x1111}, {4096, 5904, 0x7f0000002000, 0x2222}};
  return o;
}

inline VerbsConnectRequest SampleRequest() {
  VerbsConnectRequest r;
  r.address = SampleAddress();
  r.rd_atomic = 16;
  r.qps = {{0x101, 0xabcdef}, {0x102, 1}, {0x103, 0}, {0xffffff, 0xffffff}};
  return r;
}

inline VerbsAcceptReply SampleReply() {
  VerbsAcceptReply r;
  r.max_dest_rd_atomic = 8;
  r.qps = {{0x201, 5}, {0x202, 6}};
  return r;
}

}  // namespace ft::rdma::testing

#endif  // FT_TRANSFER_ENGINE_VERBS_TESTS_SAMPLE_VERBS_BLOBS_H_
