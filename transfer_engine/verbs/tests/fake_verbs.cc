#include "transfer_engine/verbs/tests/fake_verbs.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "common/mutex.h"

namespace ft::rdma::testing {

namespace {

struct FakeDevice {
  ibv_device device{};
  int index = 0;
};

struct FakeContext {
  ibv_context context{};
  int device = 0;
};

// Which file page backs an address: registration pins pages, so a NIC keeps reading and
// writing the pages that were mapped at registration even after the address is unmapped and
// something else is mapped there. The fake can tell only for file-backed memory (an arena in
// /dev/shm): anonymous memory has no name to compare.
struct FilePage {
  unsigned long dev_major = 0, dev_minor = 0, inode = 0;
  uint64_t offset = 0;  // of the address in the file
  bool operator==(const FilePage&) const = default;
};

// Reads /proc/self/maps. False when `addr` is not in a file-backed mapping (or unreadable).
bool FilePageAt(uint64_t addr, FilePage* out) {
  std::FILE* maps = std::fopen("/proc/self/maps", "re");
  if (maps == nullptr) return false;
  char line[512];
  bool found = false;
  while (!found && std::fgets(line, sizeof(line), maps) != nullptr) {
    unsigned long long start = 0, end = 0, offset = 0;
    unsigned long major = 0, minor = 0, inode = 0;
    if (std::sscanf(line, "%llx-%llx %*s %llx %lx:%lx %lu", &start, &end, &offset, &major, &minor, &inode) != 6) {
      continue;
    }
    if (addr < start || addr >= end) continue;
    found = true;
    if (inode == 0) {
      std::fclose(maps);
      return false;
    }
    *out = FilePage{major, minor, inode, offset + (addr - start)};
  }
  std::fclose(maps);
  return found;
}

struct FakeMr {
  ibv_mr mr{};
  int access = 0;
  bool file_backed = false;
  FilePage pinned;  // the page the MR's first byte was mapped from at registration

  // True when the address still shows the pages this MR pinned.
  bool StillMapped() const {
    if (!file_backed) return true;
    FilePage now;
    return FilePageAt(reinterpret_cast<uint64_t>(mr.addr), &now) && now == pinned;
  }
};

struct FakeCq {
  ibv_cq cq{};
  std::deque<ibv_wc> entries;
};

struct PendingRead {
  uint64_t wr_id;
  uint64_t local_addr;
  uint32_t len;
  uint32_t lkey;
  uint64_t remote_addr;
  uint32_t rkey;
  bool signaled;
};

struct FakeQp {
  ibv_qp qp{};
  FakeVerbs::QpView view;
  uint32_t max_send_sge = 0;
  bool sig_all = false;
  std::deque<PendingRead> queue;
};

const char* StateName(ibv_qp_state s) {
  switch (s) {
    case IBV_QPS_RESET: return "RESET";
    case IBV_QPS_INIT: return "INIT";
    case IBV_QPS_RTR: return "RTR";
    case IBV_QPS_RTS: return "RTS";
    case IBV_QPS_SQD: return "SQD";
    case IBV_QPS_SQE: return "SQE";
    case IBV_QPS_ERR: return "ERR";
    default: return "?";
  }
}

}  // namespace

struct FakeVerbs::State {
  FakeNicConfig config;
  VerbsApi api{};
  mutable Mutex mutex;
  std::vector<std::unique_ptr<FakeDevice>> devices GUARDED_BY(mutex);
  std::map<ibv_context*, std::unique_ptr<FakeContext>> contexts GUARDED_BY(mutex);
  std::map<ibv_pd*, std::unique_ptr<ibv_pd>> pds GUARDED_BY(mutex);
  std::map<uint32_t, std::unique_ptr<FakeMr>> mrs GUARDED_BY(mutex);  // by key (lkey == rkey)
  std::map<ibv_cq*, std::unique_ptr<FakeCq>> cqs GUARDED_BY(mutex);
  std::map<uint32_t, std::unique_ptr<FakeQp>> qps GUARDED_BY(mutex);  // by qp_num, creation order
  std::vector<std::string> transitions GUARDED_BY(mutex);
  uint32_t next_key GUARDED_BY(mutex) = 0x1000;
  uint32_t next_qp_num GUARDED_BY(mutex) = 0x100;
  uint64_t reads GUARDED_BY(mutex) = 0;
  uint64_t fail_at GUARDED_BY(mutex) = 0;
  ibv_wc_status fail_status GUARDED_BY(mutex) = IBV_WC_SUCCESS;
  uint64_t break_after GUARDED_BY(mutex) = 0;  // 0: none
  bool hold GUARDED_BY(mutex) = false;
  uint64_t registrations GUARDED_BY(mutex) = 0;
  uint64_t stale_reads GUARDED_BY(mutex) = 0;
  bool overrun GUARDED_BY(mutex) = false;

  uint16_t Lid(int device) const { return static_cast<uint16_t>(1 + device); }
  void Gid(int device, int index, ibv_gid* gid) const {
    std::memset(gid, 0, sizeof(*gid));
    gid->raw[0] = 0xfe;
    gid->raw[1] = 0x80;
    gid->raw[14] = static_cast<uint8_t>(device);
    gid->raw[15] = static_cast<uint8_t>(index);
  }
  int DeviceOf(ibv_context* c) const REQUIRES(mutex) { return contexts.at(c)->device; }

  void Push(FakeQp* qp, uint64_t wr_id, ibv_wc_status status, uint32_t len) REQUIRES(mutex) {
    auto* cq = cqs.at(qp->qp.send_cq).get();
    if (static_cast<int>(cq->entries.size()) >= cq->cq.cqe) overrun = true;
    ibv_wc wc{};
    wc.wr_id = wr_id;
    wc.status = status;
    wc.opcode = IBV_WC_RDMA_READ;
    wc.byte_len = status == IBV_WC_SUCCESS ? len : 0;
    wc.qp_num = qp->qp.qp_num;
    cq->entries.push_back(wc);
  }

  void ToError(FakeQp* qp) REQUIRES(mutex) {
    qp->qp.state = qp->view.state = IBV_QPS_ERR;
    while (!qp->queue.empty()) {
      Push(qp, qp->queue.front().wr_id, IBV_WC_WR_FLUSH_ERR, 0);
      qp->queue.pop_front();
    }
  }

  // The status a read gets from the fabric, after moving the bytes when it succeeds.
  ibv_wc_status Execute(FakeQp* qp, const PendingRead& r) REQUIRES(mutex) {
    auto peer_it = qps.find(qp->view.attr.dest_qp_num);
    if (peer_it == qps.end()) return IBV_WC_RETRY_EXC_ERR;  // nobody answers
    FakeQp* peer = peer_it->second.get();
    if ((peer->view.state != IBV_QPS_RTR && peer->view.state != IBV_QPS_RTS) ||
        peer->view.attr.dest_qp_num != qp->qp.qp_num) {
      return IBV_WC_RETRY_EXC_ERR;
    }
    const ibv_ah_attr& ah = qp->view.attr.ah_attr;
    const int peer_device = DeviceOf(peer->qp.context);
    if (ah.is_global) {
      ibv_gid want;
      bool found = false;
      for (int i = 0; i < config.gid_table_len && !found; ++i) {
        Gid(peer_device, i, &want);
        found = std::memcmp(want.raw, ah.grh.dgid.raw, 16) == 0;
      }
      if (!found) return IBV_WC_RETRY_EXC_ERR;
    } else if (ah.dlid != Lid(peer_device)) {
      return IBV_WC_RETRY_EXC_ERR;
    }
    if (qp->view.attr.sq_psn != peer->view.attr.rq_psn) return IBV_WC_RETRY_EXC_ERR;  // out of sequence
    if (qp->view.attr.max_rd_atomic == 0) return IBV_WC_LOC_QP_OP_ERR;
    if (peer->view.attr.max_dest_rd_atomic == 0 || !(peer->view.access & IBV_ACCESS_REMOTE_READ)) {
      return IBV_WC_REM_ACCESS_ERR;
    }
    if (r.len > config.max_msg_sz) return IBV_WC_LOC_LEN_ERR;
    auto remote = mrs.find(r.rkey);
    if (remote == mrs.end() || remote->second->mr.pd != peer->qp.pd || !(remote->second->access & IBV_ACCESS_REMOTE_READ)) {
      return IBV_WC_REM_ACCESS_ERR;
    }
    const ibv_mr& rm = remote->second->mr;
    const uint64_t rbase = reinterpret_cast<uint64_t>(rm.addr);
    if (r.remote_addr < rbase || r.remote_addr - rbase > rm.length || r.len > rm.length - (r.remote_addr - rbase)) {
      return IBV_WC_REM_ACCESS_ERR;
    }
    auto local = mrs.find(r.lkey);
    if (local == mrs.end() || local->second->mr.pd != qp->qp.pd || !(local->second->access & IBV_ACCESS_LOCAL_WRITE)) {
      return IBV_WC_LOC_PROT_ERR;
    }
    const ibv_mr& lm = local->second->mr;
    const uint64_t lbase = reinterpret_cast<uint64_t>(lm.addr);
    if (r.local_addr < lbase || r.local_addr - lbase > lm.length || r.len > lm.length - (r.local_addr - lbase)) {
      return IBV_WC_LOC_PROT_ERR;
    }
    // A registration that outlived its mapping: the NIC moves bytes between the pages it
    // pinned, which nobody sees through these addresses any more. The read still succeeds.
    if (!remote->second->StillMapped() || !local->second->StillMapped()) {
      ++stale_reads;
      return IBV_WC_SUCCESS;
    }
    std::memmove(reinterpret_cast<void*>(r.local_addr), reinterpret_cast<const void*>(r.remote_addr), r.len);
    return IBV_WC_SUCCESS;
  }

  void Progress(ibv_cq* cq) REQUIRES(mutex) {
    if (hold) return;
    for (auto& [num, qp] : qps) {
      if (qp->qp.send_cq != cq) continue;
      for (int k = 0; k < config.reads_per_poll && !qp->queue.empty(); ++k) {
        if (break_after != 0 && reads >= break_after) {
          break_after = 0;
          transitions.push_back(fmt::format("qp {} {}->ERR (injected)", num, StateName(qp->view.state)));
          ToError(qp.get());
          break;
        }
        PendingRead r = qp->queue.front();
        qp->queue.pop_front();
        ++reads;
        ++qp->view.reads;
        ibv_wc_status status = (fail_at != 0 && reads == fail_at) ? fail_status : Execute(qp.get(), r);
        if (status != IBV_WC_SUCCESS) {
          Push(qp.get(), r.wr_id, status, 0);  // errors complete even when unsignalled
          ToError(qp.get());
          break;
        }
        if (r.signaled) Push(qp.get(), r.wr_id, IBV_WC_SUCCESS, r.len);
      }
    }
  }

  // Checks a transition's mask like the kernel's ib_modify_qp_is_ok for an RC QP.
  bool TransitionOk(ibv_qp_state from, ibv_qp_state to, int mask, std::string* why) const {
    int required = 0, optional = 0;
    if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) {
      required = IBV_QP_STATE;
    } else if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) {
      required = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    } else if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
      required = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      optional = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
    } else if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) {
      required = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                 IBV_QP_MAX_QP_RD_ATOMIC;
      optional = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER |
                 IBV_QP_PATH_MIG_STATE;
    } else {
      *why = "no such transition";
      return false;
    }
    if ((mask & required) != required) {
      *why = fmt::format("mask {:#x} lacks required {:#x}", mask, required & ~mask);
      return false;
    }
    if (mask & ~(required | optional)) {
      *why = fmt::format("mask {:#x} has attributes {:#x} this transition does not take", mask,
                         mask & ~(required | optional));
      return false;
    }
    return true;
  }

  int Modify(FakeQp* qp, const ibv_qp_attr* attr, int mask) REQUIRES(mutex) {
    const ibv_qp_state from = qp->view.state;
    const ibv_qp_state to = (mask & IBV_QP_STATE) ? attr->qp_state : from;
    std::string why;
    auto refuse = [&](std::string reason) REQUIRES(mutex) {
      transitions.push_back(fmt::format("qp {} {}->{} refused: {}", qp->qp.qp_num, StateName(from), StateName(to), reason));
      return EINVAL;
    };
    if (!(mask & IBV_QP_STATE)) return refuse("no IBV_QP_STATE");
    if (!TransitionOk(from, to, mask, &why)) return refuse(why);
    const int device = DeviceOf(qp->qp.context);
    if (to == IBV_QPS_INIT && attr->port_num != 1) return refuse(fmt::format("port {}", attr->port_num));
    if (to == IBV_QPS_RTR) {
      if (attr->path_mtu > config.mtu) return refuse("path MTU above the port's");
      if (attr->ah_attr.port_num != qp->view.attr.port_num) return refuse("AV port differs from the QP's");
      if (config.link_layer == IBV_LINK_LAYER_ETHERNET && !attr->ah_attr.is_global) return refuse("RoCE needs a GRH");
      if (attr->ah_attr.is_global && attr->ah_attr.grh.sgid_index >= config.gid_table_len) return refuse("sgid index");
      if (attr->max_dest_rd_atomic > config.max_qp_rd_atom) return refuse("max_dest_rd_atomic above the device's");
      if (attr->dest_qp_num > 0xffffff || attr->rq_psn > 0xffffff) return refuse("24-bit field overflow");
    }
    if (to == IBV_QPS_RTS) {
      if (attr->max_rd_atomic > config.max_qp_rd_atom) return refuse("max_rd_atomic above the device's");
      if (attr->sq_psn > 0xffffff) return refuse("24-bit field overflow");
    }
    (void)device;
    // Keep what this transition set.
    ibv_qp_attr& kept = qp->view.attr;
    if (mask & IBV_QP_PKEY_INDEX) kept.pkey_index = attr->pkey_index;
    if (mask & IBV_QP_PORT) kept.port_num = attr->port_num;
    if (mask & IBV_QP_ACCESS_FLAGS) qp->view.access = static_cast<int>(attr->qp_access_flags), kept.qp_access_flags = attr->qp_access_flags;
    if (mask & IBV_QP_AV) kept.ah_attr = attr->ah_attr;
    if (mask & IBV_QP_PATH_MTU) kept.path_mtu = attr->path_mtu;
    if (mask & IBV_QP_DEST_QPN) kept.dest_qp_num = attr->dest_qp_num;
    if (mask & IBV_QP_RQ_PSN) kept.rq_psn = attr->rq_psn;
    if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) kept.max_dest_rd_atomic = attr->max_dest_rd_atomic;
    if (mask & IBV_QP_MIN_RNR_TIMER) kept.min_rnr_timer = attr->min_rnr_timer;
    if (mask & IBV_QP_TIMEOUT) kept.timeout = attr->timeout;
    if (mask & IBV_QP_RETRY_CNT) kept.retry_cnt = attr->retry_cnt;
    if (mask & IBV_QP_RNR_RETRY) kept.rnr_retry = attr->rnr_retry;
    if (mask & IBV_QP_SQ_PSN) kept.sq_psn = attr->sq_psn;
    if (mask & IBV_QP_MAX_QP_RD_ATOMIC) kept.max_rd_atomic = attr->max_rd_atomic;
    transitions.push_back(fmt::format("qp {} {}->{}", qp->qp.qp_num, StateName(from), StateName(to)));
    if (to == IBV_QPS_ERR) {
      ToError(qp);
    } else {
      qp->qp.state = qp->view.state = to;
      if (to == IBV_QPS_RESET) qp->queue.clear(), kept = ibv_qp_attr{};
    }
    return 0;
  }
};

namespace {

FakeVerbs::State* g_state = nullptr;

ibv_device** GetDeviceList(int* num) {
  auto& s = *g_state;
  MutexLock lock(&s.mutex);
  if (s.config.device_list_errno != 0) {
    errno = s.config.device_list_errno;
    if (num) *num = 0;
    return nullptr;
  }
  auto** list = new ibv_device*[s.devices.size() + 1];
  for (size_t i = 0; i < s.devices.size(); ++i) list[i] = &s.devices[i]->device;
  list[s.devices.size()] = nullptr;
  if (num) *num = static_cast<int>(s.devices.size());
  return list;
}

void FreeDeviceList(ibv_device** list) { delete[] list; }

const char* GetDeviceName(ibv_device* device) { return device->name; }

ibv_context* OpenDevice(ibv_device* device) {
  auto& s = *g_state;
  MutexLock lock(&s.mutex);
  auto c = std::make_unique<FakeContext>();
  c->context.device = device;
  c->device = reinterpret_cast<FakeDevice*>(device)->index;
  ibv_context* raw = &c->context;
  s.contexts[raw] = std::move(c);
  return raw;
}

int CloseDevice(ibv_context* context) {
  auto& s = *g_state;
  MutexLock lock(&s.mutex);
  return s.contexts.erase(context) ? 0 : EINVAL;
}

int QueryDevice(ibv_context*, ibv_device_attr* attr) {
  auto& s = *g_state;
  std::memset(attr, 0, sizeof(*attr));
  attr->max_mr_size = s.config.max_mr_size;
  attr->max_qp = 1 << 16;
  attr->max_qp_wr = s.config.max_qp_wr;
  attr->max_sge = 16;
  attr->max_cq = 1 << 16;
  attr->max_cqe = s.config.max_cqe;
  attr->max_mr = 1 << 20;
  attr->max_pd = 1 << 16;
  attr->max_qp_rd_atom = s.config.max_qp_rd_atom;
  attr->max_qp_init_rd_atom = s.config.max_qp_rd_atom;
  attr->phys_port_cnt = 1;
  return 0;
}

int QueryPort(ibv_context* context, uint8_t port, ibv_port_attr* attr) {
  auto& s = *g_state;
  MutexLock lock(&s.mutex);
  if (port != 1) return EINVAL;
  std::memset(attr, 0, sizeof(*attr));
  attr->state = s.config.port_state;
  attr->max_mtu = IBV_MTU_4096;
  attr->active_mtu = s.config.mtu;
  attr->gid_tbl_len = s.config.gid_table_len;
  attr->max_msg_sz = s.config.max_msg_sz;
  attr->lid = s.config.link_layer == IBV_LINK_LAYER_ETHERNET ? 0 : s.Lid(s.DeviceOf(context));
  attr->link_layer = s.config.link_layer;
  return 0;
}

int QueryGid(ibv_context* context, uint8_t port, int index, ibv_gid* gid) {
  auto& s = *g_state;
  MutexLock lock(&s.mutex);
  if (port != 1 || index < 0 || index >= s.config.gid_table_len) return EINVAL;
  s.Gid(s.DeviceOf(context), index, gid);
  return 0;
}

ibv_pd* AllocPd(ibv_context* context) {
  auto& s = *g_state;
  MutexLock lock(&s.mutex);
  auto pd = std::make_unique<ibv_pd>();
  pd->context = context;
  ibv_pd* raw = pd.get();
  s.pds[raw] = std::move(pd);
  return raw;
}

int DeallocPd(ibv_pd* pd) {
  auto& s = *g_state;
  MutexLock lock(&s.mutex);
  for (auto& [key, mr] : s.mrs) {
    if (mr->mr.pd == pd) return EBUSY;
  }
  for (auto& [num, qp] : s.qps) {
    if (qp->qp.pd == pd) return EBUSY;
  }
  return s.pds.erase(pd) ? 0 : EINVAL;
}

ibv_mr* RegMr(ibv_pd* pd, void* addr, size_t length, int access) {
  auto& s = *g_state;
  MutexLock lock(&s.mutex);
  if (!s.pds.count(pd) || length == 0 || length > s.config.max_mr_size ||
      ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE))) {
    errno = EINVAL;
    return nullptr;
  }
  auto mr = std::make_unique<FakeMr>();
  mr->mr.context = pd->context;
  mr->mr.pd = pd;
  mr->mr.addr = addr;
  mr->mr.length = length;
  mr->mr.lkey = mr->mr.rkey = s.next_key;
  s.next_key += 0x101;
  mr->access = access;
  mr->file_backed = FilePageAt(reinterpret_cast<uint64_t>(addr), &mr->pinned);
  ibv_mr* raw = &mr->mr;
  s.mrs[raw->lkey] = std::move(mr);
  ++s.registrations;
  return raw;
}

int DeregMr(ibv_mr* mr) {
  auto& s = *g_state;
  MutexLock lock(&s.mutex);
  auto it = s.mrs.find(mr->lkey);
  if (it == s.mrs.end() || &it->second->mr != mr) return EINVAL;
  s.mrs.erase(it);
  return 0;
}

ibv_cq* CreateCq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel, int) {
  auto& s = *g_state;
  MutexLock lock(&s.mutex);
  if (cqe < 1 || cqe > s.config.max_cqe) {
    errno = EINVAL;
    return nullptr;
  }
  auto cq = std::make_unique<FakeCq>();
  cq->cq.context = context;
  cq->cq.cq_context = cq_context;
  cq->cq.channel = channel;
  cq->cq.cqe = cqe;
  ibv_cq* raw = &cq->cq;
  s.cqs[raw] = std::move(cq);
  return raw;
}

int DestroyCq(ibv_cq* cq) {
  auto& s = *g_state;
  MutexLock lock(&s.mutex);
  for (auto& [num, qp] : s.qps) {
    if (qp->qp.send_cq == cq || qp->qp.recv_cq == cq) return EBUSY;
  }
  return s.cqs.erase(cq) ? 0 : EINVAL;
}

ibv_qp* CreateQp(ibv_pd* pd, ibv_qp_init_attr* init) {
  auto& s = *g_state;
  MutexLock lock(&s.mutex);
  if (!s.pds.count(pd) || init->qp_type != IBV_QPT_RC || !s.cqs.count(init->send_cq) || !s.cqs.count(init->recv_cq) ||
      init->cap.max_send_wr < 1 || init->cap.max_send_wr > static_cast<uint32_t>(s.config.max_qp_wr) ||
      init->cap.max_send_sge < 1 || init->cap.max_send_sge > 16 || init->srq != nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  auto qp = std::make_unique<FakeQp>();
  qp->qp.context = pd->context;
  qp->qp.pd = pd;
  qp->qp.send_cq = init->send_cq;
  qp->qp.recv_cq = init->recv_cq;
  qp->qp.qp_num = s.next_qp_num++;
  qp->qp.state = IBV_QPS_RESET;
  qp->qp.qp_type = IBV_QPT_RC;
  qp->view.max_send_wr = init->cap.max_send_wr;
  qp->max_send_sge = init->cap.max_send_sge;
  qp->sig_all = init->sq_sig_all != 0;
  ibv_qp* raw = &qp->qp;
  s.qps[raw->qp_num] = std::move(qp);
  return raw;
}

int ModifyQp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  auto& s = *g_state;
  MutexLock lock(&s.mutex);
  auto it = s.qps.find(qp->qp_num);
  if (it == s.qps.end()) return EINVAL;
  return s.Modify(it->second.get(), attr, mask);
}

int DestroyQp(ibv_qp* qp) {
  auto& s = *g_state;
  MutexLock lock(&s.mutex);
  return s.qps.erase(qp->qp_num) ? 0 : EINVAL;
}

int PostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  auto& s = *g_state;
  MutexLock lock(&s.mutex);
  FakeQp* fq = s.qps.at(qp->qp_num).get();
  for (; wr != nullptr; wr = wr->next) {
    int err = 0;
    if (fq->view.state != IBV_QPS_RTS && fq->view.state != IBV_QPS_ERR) {
      err = EINVAL;  // only a QP in RTS sends; ERR accepts and flushes
    } else if (wr->opcode != IBV_WR_RDMA_READ || wr->num_sge != 1 || static_cast<uint32_t>(wr->num_sge) > fq->max_send_sge) {
      err = EINVAL;  // the fake NIC models single-SGE RDMA READs only
    } else if (fq->queue.size() >= fq->view.max_send_wr) {
      err = ENOMEM;  // send queue full
    }
    if (err != 0) {
      if (bad) *bad = wr;
      return err;
    }
    PendingRead r{wr->wr_id, wr->sg_list[0].addr, wr->sg_list[0].length, wr->sg_list[0].lkey,
                  wr->wr.rdma.remote_addr, wr->wr.rdma.rkey, fq->sig_all || (wr->send_flags & IBV_SEND_SIGNALED)};
    if (fq->view.state == IBV_QPS_ERR) {
      s.Push(fq, r.wr_id, IBV_WC_WR_FLUSH_ERR, 0);
      continue;
    }
    fq->queue.push_back(r);
    fq->view.most_queued = std::max<uint32_t>(fq->view.most_queued, static_cast<uint32_t>(fq->queue.size()));
  }
  return 0;
}

int PollCq(ibv_cq* cq, int n, ibv_wc* wc) {
  auto& s = *g_state;
  MutexLock lock(&s.mutex);
  auto it = s.cqs.find(cq);
  if (it == s.cqs.end()) return -1;
  s.Progress(cq);
  int got = 0;
  while (got < n && !it->second->entries.empty()) {
    wc[got++] = it->second->entries.front();
    it->second->entries.pop_front();
  }
  return got;
}

const char* WcStatusStr(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_LEN_ERR: return "local length error";
    case IBV_WC_LOC_QP_OP_ERR: return "local QP operation error";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_REM_INV_REQ_ERR: return "remote invalid request error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case IBV_WC_FATAL_ERR: return "fatal error";
    default: return "other error";
  }
}

}  // namespace

FakeVerbs::FakeVerbs(FakeNicConfig config) : state_(std::make_unique<State>()) {
  if (g_state != nullptr) {
    std::fprintf(stderr, "FakeVerbs: only one instance at a time\n");
    std::abort();
  }
  state_->config = config;
  for (int i = 0; i < config.devices; ++i) {
    auto d = std::make_unique<FakeDevice>();
    d->index = i;
    std::snprintf(d->device.name, sizeof(d->device.name), "fake%d", i);
    state_->devices.push_back(std::move(d));
  }
  VerbsApi& api = state_->api;
  api.get_device_list = &GetDeviceList;
  api.free_device_list = &FreeDeviceList;
  api.get_device_name = &GetDeviceName;
  api.open_device = &OpenDevice;
  api.close_device = &CloseDevice;
  api.query_device = &QueryDevice;
  api.query_port = &QueryPort;
  api.query_gid = &QueryGid;
  api.alloc_pd = &AllocPd;
  api.dealloc_pd = &DeallocPd;
  api.reg_mr = &RegMr;
  api.dereg_mr = &DeregMr;
  api.create_cq = &CreateCq;
  api.destroy_cq = &DestroyCq;
  api.create_qp = &CreateQp;
  api.modify_qp = &ModifyQp;
  api.destroy_qp = &DestroyQp;
  api.post_send = &PostSend;
  api.poll_cq = &PollCq;
  api.wc_status_str = &WcStatusStr;
  g_state = state_.get();
}

FakeVerbs::~FakeVerbs() { g_state = nullptr; }

const VerbsApi& FakeVerbs::api() const { return state_->api; }

void FakeVerbs::FailNthRead(uint64_t n, ibv_wc_status status) {
  MutexLock lock(&state_->mutex);
  state_->fail_at = state_->reads + n;
  state_->fail_status = status;
}

void FakeVerbs::BreakQpAfterReads(uint64_t n) {
  MutexLock lock(&state_->mutex);
  state_->break_after = state_->reads + n;
  if (state_->break_after == 0) state_->break_after = 1;
}

void FakeVerbs::HoldReads(bool hold) {
  MutexLock lock(&state_->mutex);
  state_->hold = hold;
}

std::vector<uint32_t> FakeVerbs::qp_nums() const {
  MutexLock lock(&state_->mutex);
  std::vector<uint32_t> out;
  for (auto& [num, qp] : state_->qps) out.push_back(num);
  return out;
}

FakeVerbs::QpView FakeVerbs::qp(uint32_t qp_num) const {
  MutexLock lock(&state_->mutex);
  auto it = state_->qps.find(qp_num);
  return it == state_->qps.end() ? QpView{} : it->second->view;
}

std::vector<std::string> FakeVerbs::transitions() const {
  MutexLock lock(&state_->mutex);
  return state_->transitions;
}

uint64_t FakeVerbs::reads_executed() const {
  MutexLock lock(&state_->mutex);
  return state_->reads;
}

uint64_t FakeVerbs::registrations() const {
  MutexLock lock(&state_->mutex);
  return state_->registrations;
}

uint64_t FakeVerbs::stale_reads() const {
  MutexLock lock(&state_->mutex);
  return state_->stale_reads;
}

size_t FakeVerbs::live_mrs() const {
  MutexLock lock(&state_->mutex);
  return state_->mrs.size();
}

size_t FakeVerbs::live_objects() const {
  MutexLock lock(&state_->mutex);
  return state_->contexts.size() + state_->pds.size() + state_->mrs.size() + state_->cqs.size() + state_->qps.size();
}

bool FakeVerbs::cq_overrun() const {
  MutexLock lock(&state_->mutex);
  return state_->overrun;
}

}  // namespace ft::rdma::testing
