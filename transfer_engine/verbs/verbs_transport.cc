#include "transfer_engine/verbs/verbs_transport.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "common/log.h"
#include "common/mutex.h"
#include "transfer_engine/verbs/verbs_blob.h"
#include "transfer_engine/verbs/verbs_qp.h"

namespace ft::rdma {
namespace {

constexpr int kServerAccess = IBV_ACCESS_REMOTE_READ;  // read-only regions: no local or remote write
constexpr int kClientAccess = IBV_ACCESS_LOCAL_WRITE;  // RDMA READ writes the local buffer
constexpr int kPollBatch = 32;

uint8_t Depth(int value) { return static_cast<uint8_t>(std::clamp(value, 1, 255)); }

// One RDMA READ: [offset, offset + len) of the region into dest + offset, for piece `piece`.
struct Read {
  size_t piece;
  uint64_t offset;
  uint32_t len;
};

class VerbsPath : public PiecePath {
 public:
  VerbsPath(std::unique_ptr<VerbsQps> qps, std::shared_ptr<const VerbsMemory> local, VerbsOffer offer, uint8_t* dest,
            uint64_t bytes, uint32_t depth, const VerbsOptions& options, uint32_t max_read)
      : qps_(std::move(qps)), local_(std::move(local)), offer_(std::move(offer)), dest_(dest), bytes_(bytes),
        depth_(depth), options_(options), max_read_(max_read) {}

  const char* kind() const override { return "verbs"; }

  Status Fetch(const std::vector<Piece>& pieces, const std::function<void(size_t)>& landed,
               std::vector<size_t>* left) override {
    MutexLock lock(&mutex_);
    left->clear();
    if (!broken_.ok()) {
      for (size_t i = 0; i < pieces.size(); ++i) left->push_back(i);
      return broken_;
    }
    std::vector<Read> reads;
    std::vector<uint32_t> unread(pieces.size(), 0);  // reads of each piece not yet completed
    for (size_t i = 0; i < pieces.size(); ++i) {
      const Piece& p = pieces[i];
      if (p.offset > bytes_ || p.len > bytes_ - p.offset) {
        for (size_t k = 0; k < pieces.size(); ++k) left->push_back(k);
        return Status::InvalidArgument(fmt::format("piece [{}, +{}) beyond the {} bytes connected", p.offset, p.len, bytes_));
      }
      Split(i, p, &reads, &unread[i]);
    }
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (unread[i] == 0) landed(i);  // empty piece
    }
    Status run = Run(reads, &unread, landed);
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (unread[i] != 0) left->push_back(i);
    }
    return run;
  }

 private:
  // Cuts a piece where a memory region ends on either side and at max_read_ bytes.
  void Split(size_t index, const Piece& p, std::vector<Read>* reads, uint32_t* count) const {
    for (uint64_t at = p.offset, end = p.offset + p.len; at < end;) {
      const VerbsSegment& remote = RemoteAt(at);
      const uint64_t local_offset = static_cast<uint64_t>(dest_ + at - local_->data());
      const VerbsMemory::Mr& mr = local_->MrAt(local_offset);
      uint64_t len = std::min({end - at, static_cast<uint64_t>(max_read_), remote.offset + remote.len - at,
                               mr.offset + mr.len - local_offset});
      reads->push_back({index, at, static_cast<uint32_t>(len)});
      ++*count;
      at += len;
    }
  }

  const VerbsSegment& RemoteAt(uint64_t offset) const {
    auto it = std::upper_bound(offer_.segments.begin(), offer_.segments.end(), offset,
                               [](uint64_t o, const VerbsSegment& s) { return o < s.offset; });
    return *(it - 1);
  }

  Status Post(size_t qp_index, size_t read_index, const Read& read) {
    const VerbsSegment& remote = RemoteAt(read.offset);
    const uint64_t local_offset = static_cast<uint64_t>(dest_ + read.offset - local_->data());
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uint64_t>(dest_ + read.offset);
    sge.length = read.len;
    sge.lkey = local_->MrAt(local_offset).mr->lkey;
    ibv_send_wr wr{};
    wr.wr_id = read_index;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = remote.addr + (read.offset - remote.offset);
    wr.wr.rdma.rkey = remote.rkey;
    ibv_send_wr* bad = nullptr;
    int rc = qps_->api().post_send(qps_->qp(qp_index), &wr, &bad);
    if (rc != 0) {
      return Status::Unavailable(fmt::format("verbs path: posting an RDMA READ on QP {} failed: {}",
                                             qps_->qp(qp_index)->qp_num, std::strerror(rc)));
    }
    return Status::Ok();
  }

  // Keeps depth_ reads in flight per QP until all completed or the path fails; on failure
  // moves the QPs to the error state and drains every outstanding read before returning, so
  // no late write reaches dest once the pieces are handed to another path.
  Status Run(const std::vector<Read>& reads, std::vector<uint32_t>* unread, const std::function<void(size_t)>& landed)
      REQUIRES(mutex_) {
    const VerbsApi& api = qps_->api();
    const size_t qp_count = qps_->size();
    std::vector<uint32_t> in_flight(qp_count, 0);
    std::vector<size_t> qp_of(reads.size(), 0);
    size_t next = 0, outstanding = 0, turn = 0;
    Status failure;
    auto fail = [&](Status why) {
      if (!failure.ok()) return;
      failure = std::move(why);
      qps_->ToError();
    };
    auto last_progress = std::chrono::steady_clock::now();
    ibv_wc wcs[kPollBatch];
    while (true) {
      // Fill every QP's window, round robin so the reads spread over the QPs.
      while (failure.ok() && next < reads.size()) {
        size_t q = turn++ % qp_count, tried = 0;
        while (in_flight[q] >= depth_ && tried++ < qp_count) q = turn++ % qp_count;
        if (in_flight[q] >= depth_) break;
        Status posted = Post(q, next, reads[next]);
        if (!posted.ok()) {
          fail(std::move(posted));
          break;
        }
        qp_of[next++] = q;
        ++in_flight[q];
        ++outstanding;
      }
      if (outstanding == 0) break;
      int n = api.poll_cq(qps_->cq(), kPollBatch, wcs);
      if (n < 0) {
        // The CQ itself is gone: destroying the QPs is the only way to be sure nothing lands.
        fail(Status::Unavailable("verbs path: polling the completion queue failed"));
        Abandon();
        break;
      }
      for (int k = 0; k < n; ++k) {
        const ibv_wc& wc = wcs[k];
        if (wc.wr_id >= reads.size()) continue;  // not ours: cannot happen on a private CQ
        --outstanding;
        --in_flight[qp_of[wc.wr_id]];
        const Read& read = reads[wc.wr_id];
        if (wc.status == IBV_WC_SUCCESS) {
          if (--(*unread)[read.piece] == 0) landed(read.piece);
        } else {
          fail(Status::Unavailable(fmt::format("verbs path: RDMA READ of [{}, +{}) on QP {} completed with {}",
                                               read.offset, read.len, wc.qp_num, WcStatusText(api, wc.status))));
        }
      }
      const auto now = std::chrono::steady_clock::now();
      if (n > 0) {
        last_progress = now;
      } else if (now - last_progress > options_.completion_timeout) {
        if (failure.ok()) {
          fail(Status::Unavailable(fmt::format("verbs path: no completion for {} ms with {} reads in flight",
                                               options_.completion_timeout.count(), outstanding)));
          last_progress = now;  // give the flush as long again
        } else {
          Abandon();  // not even flushes came back: stop the QPs for good
          break;
        }
      } else if (n == 0) {
        std::this_thread::yield();
      }
    }
    if (!failure.ok()) {
      broken_ = failure;
      FT_LOG(Warn, Rdma, "{}; the remaining pieces continue over TCP", failure.message());
    }
    return failure;
  }

  void Abandon() REQUIRES(mutex_) {
    qps_.reset();  // destroying the QPs stops every read for good
    broken_ = Status::Unavailable("verbs path abandoned");
  }

  Mutex mutex_;
  std::unique_ptr<VerbsQps> qps_;
  std::shared_ptr<const VerbsMemory> local_;
  const VerbsOffer offer_;
  uint8_t* const dest_;
  const uint64_t bytes_;
  const uint32_t depth_;
  const VerbsOptions options_;
  const uint32_t max_read_;
  Status broken_ GUARDED_BY(mutex_);  // not OK once the path failed
};

}  // namespace

// ---- server -------------------------------------------------------------------------------

struct VerbsServer::Connection {
  std::unique_ptr<VerbsQps> qps;
  std::shared_ptr<const VerbsMemory> memory;  // keeps the region registered while connected
};

VerbsServer::VerbsServer(std::shared_ptr<VerbsDevice> device, VerbsOptions options)
    : device_(device), options_(std::move(options)), memory_(device, kServerAccess) {}

VerbsServer::~VerbsServer() = default;

Status VerbsServer::Register(const uint8_t* data, uint64_t bytes) {
  std::shared_ptr<const VerbsMemory> memory;
  return memory_.Get(data, bytes, &memory);
}

void VerbsServer::Forget(const uint8_t* data, uint64_t bytes) { memory_.Forget(data, bytes); }

size_t VerbsServer::connections() const {
  MutexLock lock(&mutex_);
  return connections_.size();
}

std::string VerbsServer::Offer(const Region& region) {
  if (region.size() == 0) return "";
  std::shared_ptr<const VerbsMemory> memory;
  Status s = memory_.Get(region.data(), region.size(), &memory);
  if (!s.ok()) {
    FT_LOG(Warn, Rdma, "not offering RDMA for a {}-byte region: {}; peers read it over TCP", region.size(), s.ToString());
    return "";
  }
  VerbsOffer offer;
  offer.region_bytes = region.size();
  offer.address = device_->address();
  // The region may sit inside a larger registration (an arena registered whole).
  const uint64_t base = static_cast<uint64_t>(region.data() - memory->data());
  for (const VerbsMemory::Mr& mr : memory->mrs()) {
    uint64_t begin = std::max(mr.offset, base), end = std::min(mr.offset + mr.len, base + region.size());
    if (begin >= end) continue;
    offer.segments.push_back({begin - base, end - begin, reinterpret_cast<uint64_t>(memory->data() + begin), mr.mr->rkey});
  }
  return EncodeVerbsOffer(offer);
}

Status VerbsServer::Accept(const Region& region, std::string_view request_bytes, std::string* reply) {
  VerbsConnectRequest request;
  FT_RETURN_IF_ERROR(ParseVerbsConnectRequest(request_bytes, &request));
  FT_RETURN_IF_ERROR(CheckReachable(device_->address(), request.address));
  auto connection = std::make_unique<Connection>();
  FT_RETURN_IF_ERROR(memory_.Get(region.data(), region.size(), &connection->memory));
  FT_RETURN_IF_ERROR(VerbsQps::Create(device_, static_cast<int>(request.qps.size()), 1, &connection->qps));
  // Responder resources for as many reads at once as the client asked for and our NIC serves
  // (max_qp_rd_atom); the client sizes its window to the answer.
  const uint8_t responder_depth = std::min(request.rd_atomic, Depth(device_->attr().max_qp_rd_atom));
  FT_RETURN_IF_ERROR(connection->qps->ToInit(IBV_ACCESS_REMOTE_READ));
  FT_RETURN_IF_ERROR(connection->qps->ToRtr(request.address, request.qps, responder_depth));
  FT_RETURN_IF_ERROR(connection->qps->ToRts(1));
  VerbsAcceptReply out;
  out.max_dest_rd_atomic = responder_depth;
  out.qps = connection->qps->info();
  *reply = EncodeVerbsAcceptReply(out);
  // The engine never says when a client is done; the oldest connections go beyond the cap (a
  // client still reading then sees an error completion and finishes over TCP).
  MutexLock lock(&mutex_);
  connections_.push_back(std::move(connection));
  while (connections_.size() > static_cast<size_t>(std::max(1, options_.max_server_connections))) {
    connections_.pop_front();
  }
  return Status::Ok();
}

// ---- client -------------------------------------------------------------------------------

VerbsClient::VerbsClient(std::shared_ptr<VerbsDevice> device, VerbsOptions options)
    : device_(device), options_(std::move(options)), memory_(device, kClientAccess) {}

VerbsClient::~VerbsClient() = default;

Status VerbsClient::Register(uint8_t* data, uint64_t bytes) {
  std::shared_ptr<const VerbsMemory> memory;
  return memory_.Get(data, bytes, &memory);
}

void VerbsClient::Forget(const uint8_t* data, uint64_t bytes) { memory_.Forget(data, bytes); }

Status VerbsClient::Connect(std::string_view offer_bytes, uint8_t* dest, uint64_t bytes, const Exchange& exchange,
                            std::unique_ptr<PiecePath>* out) {
  VerbsOffer offer;
  FT_RETURN_IF_ERROR(ParseVerbsOffer(offer_bytes, &offer));
  if (bytes > offer.region_bytes) {
    return Status::InvalidArgument(fmt::format("want {} bytes of a {}-byte region", bytes, offer.region_bytes));
  }
  if (bytes == 0) return Status::InvalidArgument("connecting for 0 bytes");
  FT_RETURN_IF_ERROR(CheckReachable(device_->address(), offer.address));
  std::shared_ptr<const VerbsMemory> local;
  FT_RETURN_IF_ERROR(memory_.Get(dest, bytes, &local));
  const uint32_t depth = static_cast<uint32_t>(std::clamp(options_.reads_per_qp, 1, 4096));
  std::unique_ptr<VerbsQps> qps;
  FT_RETURN_IF_ERROR(VerbsQps::Create(device_, options_.qps, depth, &qps));
  FT_RETURN_IF_ERROR(qps->ToInit(0));

  VerbsConnectRequest request;
  request.address = device_->address();
  request.rd_atomic = Depth(std::min(options_.reads_per_qp, device_->attr().max_qp_init_rd_atom));
  request.qps = qps->info();
  std::string reply_bytes;
  FT_RETURN_IF_ERROR(exchange(EncodeVerbsConnectRequest(request), &reply_bytes).WithContext("verbs connect"));
  VerbsAcceptReply reply;
  FT_RETURN_IF_ERROR(ParseVerbsAcceptReply(reply_bytes, &reply));
  FT_RETURN_IF_ERROR(qps->ToRtr(offer.address, reply.qps, 1));
  // Reads in flight per QP: what we asked, what our NIC initiates and what the peer's accepts.
  const uint8_t rd_atomic = std::min(request.rd_atomic, reply.max_dest_rd_atomic);
  FT_RETURN_IF_ERROR(qps->ToRts(rd_atomic));
  const uint64_t max_read = std::min<uint64_t>(std::max<uint64_t>(options_.max_read_bytes, 4096), device_->max_msg_bytes());
  *out = std::make_unique<VerbsPath>(std::move(qps), std::move(local), std::move(offer), dest, bytes, depth, options_,
                                     static_cast<uint32_t>(max_read));
  return Status::Ok();
}

}  // namespace ft::rdma
