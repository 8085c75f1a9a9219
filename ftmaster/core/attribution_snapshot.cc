#include "ftmaster/core/attribution_snapshot.h"

namespace ft::master::attribution {
namespace {

constexpr int kMaxCommSize = 1 << 20;  // beyond: a garbled value, not a communicator

}  // namespace

void CommInfo::Grow(int size) {
  if (size > static_cast<int>(members.size())) {
    members.resize(static_cast<size_t>(size), -1);
    coll.resize(static_cast<size_t>(size), nullptr);
    p2p.resize(static_cast<size_t>(size), nullptr);
  }
}

Snapshot::Snapshot(const AttributionInput& in) {
  for (const proto::RankProgress& p : in.progress) AddProgress(&p);
  for (const proto::Event& e : in.events) {
    if (e.progress.rank >= 0) AddProgress(&e.progress);
  }
  for (const proto::Membership& m : in.membership) {
    if (m.rank < 0) continue;
    RankInfo& r = ranks_[static_cast<size_t>(IndexOf(m.rank))];
    if (r.member == nullptr || m.incarnation > r.member->incarnation) r.member = &m;
  }
  for (const proto::Event& e : in.events) {
    if (proto::Is(e, proto::EventKind::kExit) && e.rank >= 0) {
      ranks_[static_cast<size_t>(IndexOf(e.rank))].exit_event = &e;
    } else if (proto::Is(e, proto::EventKind::kFrozen) && e.rank >= 0) {
      const proto::Event*& f = ranks_[static_cast<size_t>(IndexOf(e.rank))].frozen_event;
      if (f == nullptr || e.unix_ms >= f->unix_ms) f = &e;
    }
  }
  for (RankInfo& r : ranks_) Judge(r, in);
  // Communicators: membership first, then the rows themselves.
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const RankInfo& r = ranks_[i];
    if (r.member != nullptr) {
      for (const proto::CommMember& c : r.member->comms) {
        Place(c.comm_id, c.comm_rank, c.comm_size, static_cast<int>(i), nullptr, c.p2p);
      }
    }
    if (r.progress != nullptr) {
      for (const proto::CommRow& row : r.progress->comms) {
        Place(row.comm_id, row.comm_rank, row.comm_size, static_cast<int>(i), &row, row.p2p);
      }
    }
  }
}

void Snapshot::Judge(RankInfo& r, const AttributionInput& in) {
  if (r.progress != nullptr) {
    r.node = r.progress->node;
    r.report_age_ms = static_cast<double>(in.now_unix_ms - r.progress->observed_unix_ms);
    r.stale = r.report_age_ms > in.stale_ms;
  }
  if (r.node.empty() && r.member != nullptr) r.node = r.member->node;
  r.dead = r.exit_event != nullptr || (r.progress && proto::ProcessGone(r.progress->state)) ||
           (r.member && proto::ProcessGone(r.member->state));
  r.clean_exit = r.dead && (r.exit_event != nullptr
                                ? proto::EndedCleanly(*r.exit_event)
                                : (r.progress ? proto::Is(r.progress->state, proto::RankState::kExited)
                                              : r.member && proto::Is(r.member->state, proto::RankState::kExited)));
  r.frozen = !r.dead && r.progress != nullptr && r.progress->frozen;
  r.asked_to_end = r.dead && !r.clean_exit &&
                   ((r.exit_event != nullptr && (r.exit_event->terminated_by_signal != 0 ||
                                                 proto::Is(r.exit_event->progress.state, proto::RankState::kStopped))) ||
                    (r.progress != nullptr && proto::Is(r.progress->state, proto::RankState::kStopped)));
  // Told to terminate, as an exit event of an earlier window said: a preempted rank's peers
  // may wait on it past that window (their own termination saves, one step more).
  if (r.dead && !r.clean_exit && !r.asked_to_end && in.teardown_deaths != nullptr) {
    const uint64_t incarnation = r.progress != nullptr ? r.progress->incarnation
                                 : r.member != nullptr ? r.member->incarnation
                                                       : 0;
    auto it = in.teardown_deaths->find(r.rank);
    r.asked_to_end = incarnation != 0 && it != in.teardown_deaths->end() && it->second == incarnation;
  }
}

int Snapshot::FindRank(int rank) const {
  auto it = rank_index_.find(rank);
  return it == rank_index_.end() ? -1 : it->second;
}

int Snapshot::FindComm(uint64_t id) const {
  auto it = comm_index_.find(id);
  return it == comm_index_.end() ? -1 : it->second;
}

int Snapshot::IndexOf(int rank) {
  auto [it, inserted] = rank_index_.emplace(rank, static_cast<int>(ranks_.size()));
  if (inserted) {
    ranks_.emplace_back();
    ranks_.back().rank = rank;
  }
  return it->second;
}

void Snapshot::AddProgress(const proto::RankProgress* p) {
  if (p->rank < 0) return;
  RankInfo& r = ranks_[static_cast<size_t>(IndexOf(p->rank))];
  if (r.progress == nullptr || p->observed_unix_ms > r.progress->observed_unix_ms) r.progress = p;
}

void Snapshot::Place(uint64_t id, int comm_rank, int comm_size, int rank_index, const proto::CommRow* row,
                     bool p2p) {
  if (comm_size < 1 || comm_size > kMaxCommSize || comm_rank < 0 || comm_rank >= comm_size) return;
  auto [it, inserted] = comm_index_.emplace(id, static_cast<int>(comms_.size()));
  if (inserted) {
    comms_.emplace_back();
    comms_.back().id = id;
  }
  CommInfo& c = comms_[static_cast<size_t>(it->second)];
  c.Grow(comm_size);
  const auto k = static_cast<size_t>(comm_rank);
  c.members[k] = rank_index;
  if (row != nullptr) (p2p ? c.p2p : c.coll)[k] = row;
}

}  // namespace ft::master::attribution
