#include "transfer_engine/verbs/verbs_api.h"

#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "common/mutex.h"

namespace ft::rdma {
namespace {

// The exported ibv_query_port takes the pre-1.1 attribute layout; the inline wrapper in
// verbs.h prefers the provider's extended query and falls back to it. One per process: every
// table that loads (in practice one) points at the same libibverbs.
using CompatQueryPort = int (*)(ibv_context*, uint8_t, _compat_ibv_port_attr*);
std::atomic<CompatQueryPort> g_compat_query_port{nullptr};

int QueryPort(ibv_context* context, uint8_t port, ibv_port_attr* attr) {
  // Same logic as verbs.h's ___ibv_query_port, without a link-time reference to the library.
  verbs_context* extended = verbs_get_ctx_op(context, query_port);
  if (extended != nullptr) return extended->query_port(context, port, attr, sizeof(*attr));
  std::memset(attr, 0, sizeof(*attr));
  CompatQueryPort compat = g_compat_query_port.load(std::memory_order_acquire);
  if (compat == nullptr) return ENOSYS;
  return compat(context, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

// ibv_post_send and ibv_poll_cq are inline: they call the provider through context->ops.
int PostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) { return ibv_post_send(qp, wr, bad_wr); }
int PollCq(ibv_cq* cq, int num_entries, ibv_wc* wc) { return ibv_poll_cq(cq, num_entries, wc); }

template <typename Fn>
Status Resolve(void* handle, std::string_view library, const char* name, Fn* out) {
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    return Status::Unavailable(fmt::format("{} lacks {}: rdma-core too old or not libibverbs; "
                                           "install rdma-core >= 28 or leave RDMA off (TCP is used)",
                                           library, name));
  }
  *out = reinterpret_cast<Fn>(symbol);
  return Status::Ok();
}

Status Build(std::string_view library, VerbsApi* api) {
  std::string name(library);
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Status::Unavailable(fmt::format(
        "cannot load {} ({}): no RDMA verbs on this host, pulls use TCP; install rdma-core "
        "(libibverbs1) to enable RDMA", name, why ? why : "unknown"));
  }
  // Never dlclosed: providers register themselves at load and libibverbs keeps global state.
  FT_RETURN_IF_ERROR(Resolve(handle, name, "ibv_get_device_list", &api->get_device_list));
  FT_RETURN_IF_ERROR(Resolve(handle, name, "ibv_free_device_list", &api->free_device_list));
  FT_RETURN_IF_ERROR(Resolve(handle, name, "ibv_get_device_name", &api->get_device_name));
  FT_RETURN_IF_ERROR(Resolve(handle, name, "ibv_open_device", &api->open_device));
  FT_RETURN_IF_ERROR(Resolve(handle, name, "ibv_close_device", &api->close_device));
  FT_RETURN_IF_ERROR(Resolve(handle, name, "ibv_query_device", &api->query_device));
  FT_RETURN_IF_ERROR(Resolve(handle, name, "ibv_query_gid", &api->query_gid));
  FT_RETURN_IF_ERROR(Resolve(handle, name, "ibv_alloc_pd", &api->alloc_pd));
  FT_RETURN_IF_ERROR(Resolve(handle, name, "ibv_dealloc_pd", &api->dealloc_pd));
  // The exported ibv_reg_mr, not verbs.h's macro: ft's access flags are never in the optional
  // range that needs ibv_reg_mr_iova2.
  FT_RETURN_IF_ERROR(Resolve(handle, name, "ibv_reg_mr", &api->reg_mr));
  FT_RETURN_IF_ERROR(Resolve(handle, name, "ibv_dereg_mr", &api->dereg_mr));
  FT_RETURN_IF_ERROR(Resolve(handle, name, "ibv_create_cq", &api->create_cq));
  FT_RETURN_IF_ERROR(Resolve(handle, name, "ibv_destroy_cq", &api->destroy_cq));
  FT_RETURN_IF_ERROR(Resolve(handle, name, "ibv_create_qp", &api->create_qp));
  FT_RETURN_IF_ERROR(Resolve(handle, name, "ibv_modify_qp", &api->modify_qp));
  FT_RETURN_IF_ERROR(Resolve(handle, name, "ibv_destroy_qp", &api->destroy_qp));
  FT_RETURN_IF_ERROR(Resolve(handle, name, "ibv_wc_status_str", &api->wc_status_str));
  CompatQueryPort compat = nullptr;
  FT_RETURN_IF_ERROR(Resolve(handle, name, "ibv_query_port", &compat));
  g_compat_query_port.store(compat, std::memory_order_release);
  api->query_port = &QueryPort;
  api->post_send = &PostSend;
  api->poll_cq = &PollCq;
  return Status::Ok();
}

}  // namespace

Status LoadVerbs(const VerbsApi** out, std::string_view library) {
  static Mutex mutex;
  static std::map<std::string, std::unique_ptr<VerbsApi>, std::less<>> loaded;
  MutexLock lock(&mutex);
  auto it = loaded.find(library);
  if (it == loaded.end()) {
    auto api = std::make_unique<VerbsApi>();
    FT_RETURN_IF_ERROR(Build(library, api.get()));
    it = loaded.emplace(std::string(library), std::move(api)).first;
  }
  *out = it->second.get();
  return Status::Ok();
}

std::string WcStatusText(const VerbsApi& api, ibv_wc_status status) {
  const char* text = api.wc_status_str ? api.wc_status_str(status) : nullptr;
  return fmt::format("wc status {} ({})", static_cast<int>(status), text ? text : "unknown");
}

}  // namespace ft::rdma
