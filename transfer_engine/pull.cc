// ft::rdma::Pull: one copy, several sources, all or nothing.
//
// The copy is cut into manifest chunks (the unit verified and refetched) and each chunk into
// pieces of at most piece_bytes (the unit requested). Sources are tried in order, one round
// each: a round opens the region on the source, hands the pending chunks' pieces to the fast
// path when both sides have one, and fetches the rest over `connections` TCP connections with
// `pieces_in_flight` requests outstanding on each. A chunk is verified the moment its last
// byte lands. Whatever a round did not deliver verified (a dead, silent or refusing peer, one
// trickling below min_bytes_per_second (transfer_engine/rate_floor.h), a chunk that failed its
// checksum) is pending for the next round; after the last source, request.fallback reads it. Rounds
// never overlap, so no two sources write the same chunk at once: a round ends only when
// every one of its connections has finished or given up.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "common/log.h"
#include "common/mutex.h"
#include "transfer_engine/tcp/tcp_client.h"
#include "transfer_engine/transfer.h"

namespace ft::rdma {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

struct PieceRef {
  Piece piece;
  uint64_t chunk = 0;
};

// What every thread of a pull shares. Chunk state is per round: `missing` counts the chunk's
// bytes not yet landed in this round, and the thread that lands the last one verifies it.
class PullState {
 public:
  PullState(const PullOptions& options, const PullRequest& request, PullResult* result)
      : options_(options), request_(request), result_(result), start_(Clock::now()) {
    chunk_bytes_ = request.chunk_bytes ? request.chunk_bytes : std::max<uint64_t>(request.bytes, 1);
    chunk_count_ = (request.bytes + chunk_bytes_ - 1) / chunk_bytes_;
    missing_ = std::make_unique<std::atomic<uint64_t>[]>(chunk_count_);
    attempted_.assign(chunk_count_, false);
    verified_flags_ = std::make_unique<std::atomic<bool>[]>(chunk_count_);
    for (uint64_t c = 0; c < chunk_count_; ++c) verified_flags_[c] = false;
  }

  Status Run();

 private:
  uint64_t ChunkOffset(uint64_t c) const { return c * chunk_bytes_; }
  uint64_t ChunkLen(uint64_t c) const {
    return std::min(chunk_bytes_, request_.bytes - ChunkOffset(c));
  }
  std::vector<uint64_t> PendingChunks() const {
    std::vector<uint64_t> pending;
    for (uint64_t c = 0; c < chunk_count_; ++c)
      if (!verified_flags_[c].load()) pending.push_back(c);
    return pending;
  }

  void Round(const PullSource& source);
  // Fetches `pieces` over TCP from `source` with the control connection and up to
  // connections-1 more; returns with every connection finished.
  void FetchOverTcp(const PullSource& source, std::unique_ptr<Connection> control,
                    uint32_t control_handle, const std::vector<PieceRef>& pieces);
  void Landed(const PieceRef& ref, const std::string& source_key);
  void NoteFirstByte();
  void Note(std::string line);
  void SetCause(const Status& s);
  void AddBytes(const std::string& key, uint64_t n);

  const PullOptions& options_;
  const PullRequest& request_;
  PullResult* result_;
  Clock::time_point start_;
  uint64_t chunk_bytes_ = 0;
  uint64_t chunk_count_ = 0;
  std::unique_ptr<std::atomic<uint64_t>[]> missing_;
  std::unique_ptr<std::atomic<bool>[]> verified_flags_;
  std::vector<bool> attempted_;  // requested from some source already (between rounds only)

  std::once_flag first_request_once_;
  Clock::time_point first_request_{};
  std::atomic<bool> first_byte_seen_{false};

  Mutex mu_;  // guards the result's maps and notes, and the cause
  std::optional<std::string> first_meta_;
  Status cause_ GUARDED_BY(mu_);
  bool have_cause_ GUARDED_BY(mu_) = false;
};

void PullState::Note(std::string line) {
  FT_LOG(Info, Rdma, "pull: {}", line);
  MutexLock lock(&mu_);
  result_->notes.push_back(std::move(line));
}

void PullState::SetCause(const Status& s) {
  MutexLock lock(&mu_);
  if (!have_cause_) {
    cause_ = s;
    have_cause_ = true;
  }
}

void PullState::AddBytes(const std::string& key, uint64_t n) {
  MutexLock lock(&mu_);
  result_->bytes_by_source[key] += n;
}

void PullState::NoteFirstByte() {
  if (first_byte_seen_.exchange(true)) return;
  Clock::time_point now = Clock::now();
  std::call_once(first_request_once_, [&] { first_request_ = now; });
  result_->first_byte_ms = MsSince(first_request_, now);
}

void PullState::Landed(const PieceRef& ref, const std::string& source_key) {
  uint64_t before = missing_[ref.chunk].fetch_sub(ref.piece.len, std::memory_order_acq_rel);
  if (before != ref.piece.len) return;  // more of this chunk to come
  const uint8_t* data = request_.dest + ChunkOffset(ref.chunk);
  bool ok = !request_.verify || request_.verify(ref.chunk, data, ChunkLen(ref.chunk));
  if (ok) {
    verified_flags_[ref.chunk].store(true, std::memory_order_release);
    return;
  }
  Note(fmt::format("{}: chunk {} failed verification; fetching it elsewhere", source_key, ref.chunk));
  SetCause(Status::Corrupt(fmt::format("chunk {} from {} failed verification", ref.chunk, source_key)));
}

void PullState::FetchOverTcp(const PullSource& source, std::unique_ptr<Connection> control,
                             uint32_t control_handle, const std::vector<PieceRef>& pieces) {
  const std::string key = source.peer.node + "/tcp";
  Mutex queue_mu;
  std::deque<size_t> queue;  // guarded by queue_mu (a local: not annotatable): indexes into pieces, in offset order
  for (size_t i = 0; i < pieces.size(); ++i) queue.push_back(i);
  auto next_piece = [&](size_t* out) {
    MutexLock lock(&queue_mu);
    if (queue.empty()) return false;
    *out = queue.front();
    queue.pop_front();
    return true;
  };

  // One connection's loop: keep pieces_in_flight requests outstanding, land each answer
  // straight into dest. The server answers in request order.
  auto serve = [&](Connection* connection, uint32_t handle, int index) {
    std::deque<size_t> outstanding;
    uint64_t delivered = 0;
    Status failure;
    RateFloor floor(options_.min_bytes_per_second, options_.io_timeout, Clock::now());
    while (true) {
      size_t next = 0;
      while (static_cast<int>(outstanding.size()) < options_.pieces_in_flight && next_piece(&next)) {
        const Piece& p = pieces[next].piece;
        std::call_once(first_request_once_, [&] { first_request_ = Clock::now(); });
        failure = connection->SendRead({handle, p.offset, static_cast<uint32_t>(p.len), next});
        outstanding.push_back(next);
        if (!failure.ok()) break;
      }
      if (!failure.ok() || outstanding.empty()) break;
      wire::DataHeader header;
      uint64_t error_tag = 0;
      failure = connection->ReceiveDataHeader(&header, &error_tag, &floor);
      if (!failure.ok()) break;
      const Piece& expected = pieces[outstanding.front()].piece;
      if (header.tag != outstanding.front() || header.offset != expected.offset ||
          header.len != expected.len) {
        failure = Status::Corrupt(fmt::format(
            "answered [{}, +{}) tag {} where [{}, +{}) tag {} was due", header.offset, header.len,
            header.tag, expected.offset, expected.len, outstanding.front()));
        break;
      }
      NoteFirstByte();
      failure = connection->ReceiveData(request_.dest + expected.offset, expected.len, &floor);
      if (!failure.ok()) break;
      delivered += expected.len;
      AddBytes(key, expected.len);
      Landed(pieces[outstanding.front()], key);
      outstanding.pop_front();
    }
    if (failure.ok()) {
      connection->Close();
      return;
    }
    // Its outstanding pieces stay missing: their chunks go to the next source.
    connection->Abort();
    Note(fmt::format("{}: connection {} gave up after {} bytes with {} pieces outstanding: {}", key,
                     index, delivered, outstanding.size(), failure.ToString()));
    SetCause(failure);
  };

  // The extra connections are opened in their own threads, so a slow handshake overlaps the
  // control connection's first pieces.
  std::vector<std::thread> threads;
  for (int i = 1; i < options_.connections && static_cast<size_t>(i) < pieces.size(); ++i) {
    threads.emplace_back([&, i] {
      std::unique_ptr<Connection> connection;
      Status s = Connection::Open(options_, source.peer, &connection);
      wire::OpenReply reply;
      if (s.ok()) s = connection->OpenRegion(source.region, &reply);
      if (s.ok() && reply.size != request_.bytes)
        s = Status::Corrupt(fmt::format("region size changed to {}", reply.size));
      if (!s.ok()) {
        Note(fmt::format("{}: extra connection {} not opened: {}", key, i, s.ToString()));
        return;
      }
      serve(connection.get(), reply.handle, i);
    });
  }
  serve(control.get(), control_handle, 0);
  for (std::thread& t : threads) t.join();
}

void PullState::Round(const PullSource& source) {
  const Peer& peer = source.peer;
  // RDMA READ moves the bytes NIC to NIC, unencrypted: asked to encrypt, the pull stays on TCP.
  FastPathClient* const fast_path = options_.encrypt_data ? nullptr : options_.fast_path;
  std::unique_ptr<Connection> control;
  Status s = Connection::Open(options_, peer, &control);
  wire::OpenReply reply;
  if (s.ok())
    s = control->OpenRegion(source.region, &reply, fast_path ? wire::kOpenWantsFastPath : 0);
  if (!s.ok()) {
    Note(fmt::format("{}: source given up: {}", peer.node, s.ToString()));
    SetCause(s);
    return;
  }
  if (reply.size != request_.bytes) {
    Note(fmt::format("{}: {} holds {} bytes, not the {} pulled; skipped", peer.node, source.region,
                     reply.size, request_.bytes));
    SetCause(Status::Corrupt(fmt::format("{} on {}: size differs", source.region, peer.node)));
    return;
  }
  const bool same_copy = request_.accepts_meta ? request_.accepts_meta(reply.meta)
                                              : !first_meta_ || *first_meta_ == reply.meta;
  if (!same_copy) {
    Note(fmt::format("{}: {} has a different manifest than the first source; skipped", peer.node,
                     source.region));
    SetCause(Status::Corrupt(fmt::format("{} on {}: manifest differs", source.region, peer.node)));
    return;
  }
  if (!first_meta_) first_meta_ = reply.meta;

  std::vector<PieceRef> pieces;
  uint64_t piece_bytes = std::min<uint64_t>(options_.piece_bytes, wire::kMaxReadBytes);
  for (uint64_t c : PendingChunks()) {
    if (attempted_[c]) ++result_->refetched_chunks;
    attempted_[c] = true;
    missing_[c].store(ChunkLen(c), std::memory_order_relaxed);
    uint64_t end = ChunkOffset(c) + ChunkLen(c);
    for (uint64_t off = ChunkOffset(c); off < end; off += piece_bytes)
      pieces.push_back({{off, std::min(piece_bytes, end - off)}, c});
  }

  if (fast_path && !reply.offer.empty()) {
    std::unique_ptr<PiecePath> path;
    Exchange exchange = [&](std::string_view request, std::string* out) {
      return control->FastConnect(reply.handle, request, out);
    };
    s = fast_path->Connect(reply.offer, request_.dest, request_.bytes, exchange, &path);
    if (!s.ok()) {
      Note(fmt::format("{}: no {} path ({}); all over TCP", peer.node, fast_path->kind(),
                       s.ToString()));
    } else {
      std::vector<Piece> plain;
      plain.reserve(pieces.size());
      for (const PieceRef& ref : pieces) plain.push_back(ref.piece);
      const std::string key = peer.node + "/" + path->kind();
      std::call_once(first_request_once_, [&] { first_request_ = Clock::now(); });
      std::vector<size_t> left;
      s = path->Fetch(
          plain,
          [&](size_t i) {
            NoteFirstByte();
            AddBytes(key, pieces[i].piece.len);
            Landed(pieces[i], key);
          },
          &left);
      if (!s.ok()) {
        Note(fmt::format("{}: {} path failed ({}); {} pieces continue over TCP", peer.node,
                         path->kind(), s.ToString(), left.size()));
      }
      std::vector<PieceRef> rest;
      if (!s.ok()) {
        rest.reserve(left.size());
        for (size_t i : left)
          if (i < pieces.size()) rest.push_back(pieces[i]);
      }
      pieces = std::move(rest);
    }
  }
  if (!pieces.empty()) FetchOverTcp(source, std::move(control), reply.handle, pieces);
  else control->Close();
}

Status PullState::Run() {
  const std::vector<PullSource>& sources = request_.sources;
  for (size_t i = 0; i < sources.size() && !PendingChunks().empty(); ++i) Round(sources[i]);

  std::vector<uint64_t> pending = PendingChunks();
  if (!pending.empty() && request_.fallback) {
    for (uint64_t c : pending) {
      ++result_->fallback_chunks;
      uint8_t* at = request_.dest + ChunkOffset(c);
      Status s = request_.fallback(ChunkOffset(c), ChunkLen(c), at);
      if (!s.ok()) {
        Note(fmt::format("fallback: chunk {}: {}", c, s.ToString()));
        SetCause(s);
        continue;
      }
      AddBytes("fallback", ChunkLen(c));
      if (request_.verify && !request_.verify(c, at, ChunkLen(c))) {
        Note(fmt::format("fallback: chunk {} failed verification", c));
        SetCause(Status::Corrupt(fmt::format("chunk {} from the fallback failed verification", c)));
        continue;
      }
      verified_flags_[c].store(true);
    }
    pending = PendingChunks();
  }

  result_->seconds = MsSince(start_, Clock::now()) / 1000;
  if (pending.empty()) {
    result_->bytes = request_.bytes;
    return Status::Ok();
  }
  std::string what = fmt::format("pull: {} of {} chunks not delivered verified by {} sources{}",
                                 pending.size(), chunk_count_, sources.size(),
                                 request_.fallback ? " and the fallback" : " (no fallback)");
  MutexLock lock(&mu_);  // every source's thread has ended: uncontended
  if (!have_cause_) return Status::Unavailable(what);
  return cause_.WithContext(what);
}

}  // namespace

Status Pull(const PullOptions& options, const PullRequest& request, PullResult* result) {
  if (request.bytes > 0 && request.dest == nullptr)
    return Status::InvalidArgument("pull: no destination buffer");
  if (options.piece_bytes == 0 || options.connections < 1 || options.pieces_in_flight < 1)
    return Status::InvalidArgument(fmt::format(
        "pull: piece_bytes {}, connections {}, pieces_in_flight {}: each must be at least 1",
        options.piece_bytes, options.connections, options.pieces_in_flight));
  *result = PullResult{};
  if (request.bytes == 0) return Status::Ok();
  PullState state(options, request, result);
  return state.Run();
}

}  // namespace ft::rdma
