#include "ftmaster/job_membership.h"

#include "common/log.h"
#include "ftmaster/loop_util.h"
#include "schema/master_hash.h"
#include "schema/rank_hashes.h"

namespace ft::master {

namespace mh = schema::master_hash;

std::vector<proto::Membership> SlimMembers(std::span<const proto::Membership> members) {
  std::vector<proto::Membership> slim;
  slim.reserve(members.size());
  for (const proto::Membership& m : members) {
    proto::Membership s;
    s.rank = m.rank;
    s.node = m.node;
    s.incarnation = m.incarnation;
    slim.push_back(std::move(s));
  }
  return slim;
}

Status JobMembership::Init() {
  const MasterOptions& o = ctx_->options;
  if (!o.topology.empty()) {
    FT_RETURN_IF_ERROR(Topology::Parse(o.topology, o.order, 0, &explicit_topology_));
    have_explicit_ = true;
  } else if (!o.order.empty()) {
    return Status::InvalidArgument("--order needs --topology");
  }
  return Status::Ok();
}

void JobMembership::NewTerm(Clock::time_point now) {
  // ranks_ stays until the read that replaces it, in HSCAN chunks a tick each. That read comes
  // whatever ranks:version says: a term begins after Redis was away, and a Redis that lost its
  // data (restarted empty, flushed) counts ranks:version from 0 again, so an unchanged version
  // may hide changed values (the restore plan's version did: a campaign seed).
  version_read_.clear();
  cursor_.clear();
  next_read_ = now;
}

bool JobMembership::LoadTerm(const MasterHash& state) {
  const MasterOptions& o = ctx_->options;
  auto field = [&state](const char* name) {
    auto it = state.find(name);
    return it == state.end() ? std::string() : it->second;
  };
  // The topology this leader decides with, for `ftmaster status` (which has no --topology of
  // its own to go by); an inferred one is recomputed by every reader from the membership.
  if (have_explicit_ && (field(mh::kTopology) != o.topology || field(mh::kOrder) != o.order)) {
    if (!ctx_->writer.Run({mh::Set(ctx_->keys, {{mh::kTopology, o.topology}, {mh::kOrder, o.order}})})) {
      return false;
    }
  }
  last_inferred_.reset();
  inferred_.reset();
  if (!have_explicit_ && state.count(mh::kInferredTopology)) {
    Topology t;
    Status s = Topology::Parse(field(mh::kInferredTopology), field(mh::kInferredOrder), 0, &t);
    if (s.ok()) {
      last_inferred_ = Topology::Kept(t, "inferred while the ranks ran");
    } else {
      ctx_->bad.Report("master inferred_topology", field("inferred_topology"), s);
    }
  }
  return true;
}

bool JobMembership::Read(Clock::time_point now, bool window_open) {
  const auto start = Clock::now();
  const MasterOptions& o = ctx_->options;
  redis::Store& store = *ctx_->store;
  if (cursor_.empty()) {
    // Workers bump ranks:version with every membership write; unchanged, the hash is too.
    // Without the key (older workers, or Redis lost it) the hash is read every time.
    redis::Reply version;
    if (!store.Run(schema::GetRanksVersion(ctx_->keys), &version).ok()) return false;
    const bool versioned = version.is_string();
    if (versioned && loaded_ && version.str() == version_read_) {
      next_read_ = now + Spacing(window_open ? o.tick : o.ranks_period, MsSince(start));
      if (after_read_) after_read_();  // a new term's models still need the membership it kept
      return true;
    }
    pass_version_ = versioned ? version.str() : "";
    ranks_.BeginPass();
  }
  // In HSCAN chunks, one per call: 131k members are ~40 MB, and one HGETALL of them would hold
  // the loop (and the lease) for seconds.
  const std::string cursor = cursor_.empty() ? std::string(1, '0') : cursor_;
  redis::Reply reply;
  if (!store.Run({"HSCAN", ctx_->keys.Ranks(), cursor, "COUNT", kRanksChunk}, &reply).ok()) {
    return false;
  }
  if (!reply.is_array() || reply.size() != 2 || !reply[0].is_string()) {
    ctx_->bad.Report(ctx_->keys.Ranks(), reply.DebugString().substr(0, 64),
                     Status::Corrupt("not an HSCAN reply (wrong key type?)"));
    cursor_.clear();
    next_read_ = now + o.ranks_period;
    return true;
  }
  ranks_.LoadPairs(reply[1], &ctx_->bad);
  if (reply[0].str() != "0") {
    cursor_ = reply[0].str();
    next_read_ = now + Spacing(o.tick, MsSince(start));
    return true;
  }
  cursor_.clear();
  ranks_.EndPass();
  loaded_ = true;
  version_read_ = pass_version_;
  ++ctx_->stats.ranks_reads;
  const double cost = MsSince(start);
  next_read_ = now + Spacing(window_open ? o.tick : o.ranks_period, cost);
  if (after_read_) after_read_();
  return true;
}

const Topology& JobMembership::CurrentTopology() {
  if (have_explicit_) return explicit_topology_;
  if (!inferred_ || inferred_for_ != ranks_.version()) {
    inferred_ = Topology::InferOrKeep(ranks_.values(), last_inferred_ ? &*last_inferred_ : nullptr);
    inferred_for_ = ranks_.version();
    const bool changed = !last_inferred_ || last_inferred_->sizes() != inferred_->sizes() ||
                         last_inferred_->order() != inferred_->order();
    if (inferred_->known() && !inferred_->kept() && changed &&
        ctx_->writer.Run({mh::Set(ctx_->keys, {{mh::kInferredTopology, inferred_->sizes()},
                                               {mh::kInferredOrder, inferred_->order()}})})) {
      last_inferred_ = Topology::Kept(*inferred_, "inferred while the ranks ran");
    }
  }
  return *inferred_;
}

}  // namespace ft::master
