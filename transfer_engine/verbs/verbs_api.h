// ft::rdma::VerbsApi: every libibverbs call the verbs transport makes, as a table of function
// pointers. ft never links libibverbs: LoadVerbs() dlopens "libibverbs.so.1" at run time, so
// ftworker runs on hosts without rdma-core (Unavailable, with why), and tests hand the
// transport a fake table (transfer_engine/verbs/tests/fake_verbs.h) that simulates a NIC in one
// process.
//
// Calls that <infiniband/verbs.h> defines inline (ibv_post_send, ibv_poll_cq, and the
// ibv_query_port wrapper that prefers the provider's extended query) are entries too; the
// real table's entries run the same inline code, which reaches the provider through the
// context's ops and needs no exported symbol.
//
// A table is immutable once built and may be used from any thread (libibverbs' own calls are
// thread-safe); it stays valid for the life of the process (the library is never dlclosed).
#ifndef FT_TRANSFER_ENGINE_VERBS_VERBS_API_H_
#define FT_TRANSFER_ENGINE_VERBS_VERBS_API_H_

#include <infiniband/verbs.h>

#include <string>
#include <string_view>

#include "common/status.h"

namespace ft::rdma {

struct VerbsApi {
  ibv_device** (*get_device_list)(int* num_devices);
  void (*free_device_list)(ibv_device** list);
  const char* (*get_device_name)(ibv_device* device);
  ibv_context* (*open_device)(ibv_device* device);
  int (*close_device)(ibv_context* context);
  int (*query_device)(ibv_context* context, ibv_device_attr* attr);
  int (*query_port)(ibv_context* context, uint8_t port, ibv_port_attr* attr);
  int (*query_gid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid);
  ibv_pd* (*alloc_pd)(ibv_context* context);
  int (*dealloc_pd)(ibv_pd* pd);
  ibv_mr* (*reg_mr)(ibv_pd* pd, void* addr, size_t length, int access);
  int (*dereg_mr)(ibv_mr* mr);
  ibv_cq* (*create_cq)(ibv_context* context, int cqe, void* cq_context,
                       ibv_comp_channel* channel, int comp_vector);
  int (*destroy_cq)(ibv_cq* cq);
  ibv_qp* (*create_qp)(ibv_pd* pd, ibv_qp_init_attr* attr);
  int (*modify_qp)(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask);
  int (*destroy_qp)(ibv_qp* qp);
  int (*post_send)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
  int (*poll_cq)(ibv_cq* cq, int num_entries, ibv_wc* wc);
  const char* (*wc_status_str)(ibv_wc_status status);
};

inline constexpr const char* kVerbsLibrary = "libibverbs.so.1";

// The real library's table. Unavailable when `library` cannot be loaded or lacks a symbol (the
// message names the library and says what to install); the table is built once per library
// name and shared. Does not look for devices: that is VerbsDevice::Open's business.
Status LoadVerbs(const VerbsApi** out, std::string_view library = kVerbsLibrary);

// "IBV_WC_REM_ACCESS_ERR (remote access error)": a completion status for messages, through the
// table's wc_status_str.
std::string WcStatusText(const VerbsApi& api, ibv_wc_status status);

}  // namespace ft::rdma

#endif  // FT_TRANSFER_ENGINE_VERBS_VERBS_API_H_
