#include "proto/codec.h"

#include <algorithm>

#include <cfloat>
#include <cmath>
#include <exception>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/hex.h"
#include "proto/json_codec.h"
#include "proto/json_fields.h"

namespace ft::proto {
namespace {

using namespace ft::proto::json;  // NOLINT: the codec's vocabulary (json_codec.h)

constexpr int64_t kRankLow = -1;  // -1: unknown rank (a process whose launcher said nothing)

// A rank state is one of RankState's names (messages.h); "" only where the field is optional.
Status CheckRankState(const Reader& r, const std::string& state) {
  if (state.empty() || ParseRankState(state).has_value()) return Status::Ok();
  return Status::Corrupt(r.Path("state") + ": unknown rank state '" + state.substr(0, 16) +
                         "' (running, disabled, exited, dead, stopped)");
}

Status ReadRankState(const Reader& r, const char* key, Need need, std::string* state) {
  FT_RETURN_IF_ERROR(r.Str(key, need, state, need == Need::kRequired ? Empty::kRejected : Empty::kAllowed));
  return CheckRankState(r, *state);
}

// A name a newer libft.so may write: lowercase letters and digits, at most 32 of them (every
// OpKind name is one). Anything else is not a name but damage.
bool LooksLikeOpName(std::string_view name) {
  if (name.empty() || name.size() > 32) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); });
}

// An op kind is one of OpKind's names (messages.h). A name this build does not know but that
// looks like one is a newer writer's op (during a rolling upgrade a newer libft.so's): kOther,
// so its event or table is kept, not dropped whole. Anything else is refused by name. An empty
// one (allowed where the field is optional, as absent) is kNone.
Status ReadOp(const Reader& r, const char* key, Need need, OpKind* out) {
  std::string name;
  FT_RETURN_IF_ERROR(r.Str(key, need, &name, need == Need::kRequired ? Empty::kRejected : Empty::kAllowed));
  if (name.empty()) return Status::Ok();
  std::optional<OpKind> kind = ParseOpKind(name);
  if (!kind.has_value() && LooksLikeOpName(name)) kind = OpKind::kOther;
  if (!kind.has_value()) return UnknownName<OpKind>(r.Path(key), "op kind", name, kOpKinds, OpKindName);
  *out = *kind;
  return Status::Ok();
}

OJson OpJson(OpKind op) { return OpKindName(op); }

// The field lists (json_fields.h): each struct's fields once, in the order they are written.

const auto kCommRowFields = [](auto& io, auto& c) {
  io.Hex("comm", c.comm_id, Need::kRequired);
  io.Bool("p2p", c.p2p, Need::kOptional);
  io.Int("comm_rank", c.comm_rank, Need::kOptional, -1);
  io.Int("comm_size", c.comm_size, Need::kOptional, 0);
  io.Custom("op", c.op, Need::kOptional, OpJson, ReadOp);
  io.Int("bytes", c.bytes, Need::kOptional);
  io.Int("peer", c.peer, Need::kOptional, -1);
  io.Int("entered", c.entered_seq, Need::kRequired);
  io.Int("started", c.started_seq, Need::kRequired);
  io.Int("completed", c.completed_seq, Need::kRequired);
  io.Num("entered_age_ms", c.entered_age_ms, Need::kOptional, -1);
  io.Num("started_age_ms", c.started_age_ms, Need::kOptional, -1);
  io.Num("completed_age_ms", c.completed_age_ms, Need::kOptional, -1);
};

const auto kProgressFields = [](auto& io, auto& p) {
  io.Int("rank", p.rank, Need::kRequired, kRankLow);
  io.Str("node", p.node, Need::kRequired, Empty::kRejected);
  io.Int("pid", p.pid, Need::kOptional, 0);
  io.Int("incarnation", p.incarnation, Need::kOptional);
  io.Custom("state", p.state, Need::kRequired, AsIs, ReadRankState);
  io.Int("observed_unix_ms", p.observed_unix_ms, Need::kRequired, 0);
  io.Num("last_call_age_ms", p.last_call_age_ms, Need::kOptional, -1);
  io.Num("blocked_ms", p.blocked_ms, Need::kOptional, 0);
  io.Num("cpu_pct", p.cpu_pct, Need::kOptional, 0);
  io.Bool("busy", p.busy, Need::kOptional);
  io.If(!p.proc_state.empty()).Str("proc_state", p.proc_state, Need::kOptional);
  io.Num("heartbeat_age_ms", p.heartbeat_age_ms, Need::kOptional, -1);
  io.Bool("frozen", p.frozen, Need::kOptional);
  io.Objects("comms", p.comms, Need::kOptional, kCommRowFields);
};

}  // namespace

// ---------------------------------------------------------------------------------------------

std::string CommIdHex(uint64_t id) { return Hex64(id); }

bool ParseCommIdHex(std::string_view text, uint64_t* id) { return ParseHex64(text, id); }

std::string SuspectsField(const std::vector<Suspect>& suspects) {
  std::string out;
  for (const Suspect& s : suspects) {
    if (!out.empty()) out += ',';
    out += std::to_string(s.rank) + "@" + s.node;
  }
  return out;
}

// --- RankProgress ---------------------------------------------------------------------------

std::string Encode(const RankProgress& value) { return EncodeFields(value, kProgressFields); }

Status Decode(std::string_view json, RankProgress* out) { return DecodeFields(json, out, kProgressFields); }

// --- HwSignal (inside an Event and an Incident) -------------------------------------------

namespace {

const auto kHwSignalFields = [](auto& io, auto& h) {
  io.If(!h.node.empty()).Str("node", h.node, Need::kOptional);
  io.Str("source", h.source, Need::kRequired, Empty::kRejected);
  io.Str("device", h.device, Need::kOptional);
  io.Str("kind", h.kind, Need::kRequired, Empty::kRejected);
  io.Int("value", h.value, Need::kOptional);
  io.Int("total", h.total, Need::kOptional);
  io.Bool("critical", h.critical, Need::kOptional);
  io.If(!h.ranks.empty()).Ints("ranks", h.ranks, Need::kOptional, 0);
  io.If(h.pid != 0).Int("pid", h.pid, Need::kOptional, 0);
  io.Int("unix_ms", h.unix_ms, Need::kOptional, 0);
  io.Str("detail", h.detail, Need::kOptional);
};

}  // namespace

// --- Event ----------------------------------------------------------------------------------

namespace {

Status ReadEventKind(const Reader& r, const char* key, Need need, std::string* kind) {
  FT_RETURN_IF_ERROR(r.Str(key, need, kind, Empty::kRejected));
  if (ParseEventKind(*kind)) return Status::Ok();
  return Status::Corrupt(r.Path(key) + ": unknown event kind '" + kind->substr(0, 16) +
                         "' (timeout, error, exit, slowdown, busy, frozen, hardware)");
}

// Fields of the event's kind always; the others only when set (so nothing is lost, and a person
// reading redis-cli sees only what matters for this kind).
const auto kEventFields = [](auto& io, auto& e) {
  io.Custom("kind", e.kind, Need::kRequired, AsIs, ReadEventKind);
  io.Int("rank", e.rank, Need::kRequired, kRankLow);
  io.Str("node", e.node, Need::kRequired, Empty::kRejected);
  io.Int("unix_ms", e.unix_ms, Need::kRequired, 0);
  io.Str("message", e.message, Need::kOptional);
  const bool timeout = Is(e, EventKind::kTimeout), error = Is(e, EventKind::kError),
             exit = Is(e, EventKind::kExit), slow = Is(e, EventKind::kSlowdown),
             hardware = Is(e, EventKind::kHardware);
  io.If(timeout || e.comm_id != 0).Hex("comm", e.comm_id, Need::kOptional);
  io.If(timeout || e.op != OpKind::kNone).Custom("op", e.op, Need::kOptional, OpJson, ReadOp);
  io.If(timeout || e.seq != 0).Int("seq", e.seq, Need::kOptional);
  io.If(timeout || e.age_ms != 0).Num("age_ms", e.age_ms, Need::kOptional, 0);
  io.If(timeout || e.timeout_ms != 0).Num("timeout_ms", e.timeout_ms, Need::kOptional, 0);
  io.If(timeout || e.started).Bool("started", e.started, Need::kOptional);
  io.If(error || !e.api.empty()).Str("api", e.api, Need::kOptional);
  io.If(error || !e.call.empty()).Str("call", e.call, Need::kOptional);
  io.If(error || exit || e.code != 0).Int("code", e.code, Need::kOptional);
  io.If(exit || e.clean).Bool("clean", e.clean, Need::kOptional);
  io.If(e.terminated_by_signal != 0).Int("terminated_by_signal", e.terminated_by_signal, Need::kOptional, 0, 128);
  io.If(e.status_unknown).Bool("status_unknown", e.status_unknown, Need::kOptional);
  io.If(e.terminate_unix_ms != 0).Int("terminate_unix_ms", e.terminate_unix_ms, Need::kOptional, 0);
  io.If(slow || e.step_ms != 0).Num("step_ms", e.step_ms, Need::kOptional, 0);
  io.If(slow || e.baseline_ms != 0).Num("baseline_ms", e.baseline_ms, Need::kOptional, 0);
  io.If(slow || e.compute_ms != 0).Num("compute_ms", e.compute_ms, Need::kOptional, 0);
  io.If(hardware || !(e.hw == HwSignal{}))
      .Object("hw", e.hw, hardware ? Need::kRequired : Need::kOptional, kHwSignalFields);
  // Workers always attach the progress table; a value decoded without one stays without one.
  io.If(!(e.progress == RankProgress{})).Object("progress", e.progress, Need::kOptional, kProgressFields);
};

}  // namespace

std::string Encode(const Event& e) { return EncodeFields(e, kEventFields); }

Status Decode(std::string_view json, Event* out) { return DecodeFields(json, out, kEventFields); }

// --- RankSummary ----------------------------------------------------------------------------

namespace {

const auto kOpSummaryFields = [](auto& io, auto& o) {
  io.Hex("comm", o.comm_id, Need::kRequired);
  io.Custom("op", o.op, Need::kRequired, OpJson, ReadOp);
  io.Int("bucket", o.bucket, Need::kOptional, 0, 4);
  io.Int("count", o.count, Need::kOptional);
  io.Num("p10_ms", o.p10_ms, Need::kOptional, -1);  // -1: not reported
  io.Num("p50_ms", o.p50_ms, Need::kOptional, 0);
  io.Num("p99_ms", o.p99_ms, Need::kOptional, 0);
  io.Num("max_ms", o.max_ms, Need::kOptional, 0);
  io.Int("last_seq", o.last_seq, Need::kOptional);
};

const auto kKernelSummaryFields = [](auto& io, auto& k) {
  io.Str("name", k.name, Need::kRequired, Empty::kRejected);
  io.Int("count", k.count, Need::kOptional);
  io.Num("p50_ms", k.p50_ms, Need::kOptional, 0);
  io.Num("max_ms", k.max_ms, Need::kOptional, 0);
};

const auto kSummaryFields = [](auto& io, auto& s) {
  io.Int("rank", s.rank, Need::kRequired, kRankLow);
  io.Str("node", s.node, Need::kRequired, Empty::kRejected);
  io.Int("unix_ms", s.unix_ms, Need::kRequired, 0);
  io.Int("steps", s.steps, Need::kOptional);
  io.Num("step_ms", s.step_ms, Need::kOptional, 0);
  io.Num("step_p50_ms", s.step_p50_ms, Need::kOptional, 0);
  io.Num("compute_ms", s.compute_ms, Need::kOptional, 0);
  io.Num("comm_wait_ms", s.comm_wait_ms, Need::kOptional, 0);
  io.Int("records", s.records, Need::kOptional);
  io.Int("dropped", s.dropped, Need::kOptional);
  io.Objects("ops", s.ops, Need::kOptional, kOpSummaryFields);
  io.Int("kernels", s.kernels, Need::kOptional);
  io.Objects("kernel_samples", s.kernel_samples, Need::kOptional, kKernelSummaryFields);
  io.If(s.declared_step >= 0).Int("declared_step", s.declared_step, Need::kOptional, -1);
  io.If(s.total_steps > 0).Int("total_steps", s.total_steps, Need::kOptional, 0);
  io.If(s.slowdown >= 0).Int("slowdown", s.slowdown, Need::kOptional, -1, 1);
};

}  // namespace

std::string Encode(const RankSummary& s) { return EncodeFields(s, kSummaryFields); }

Status Decode(std::string_view json, RankSummary* out) { return DecodeFields(json, out, kSummaryFields); }

// --- Membership -----------------------------------------------------------------------------

namespace {

const auto kCommMemberFields = [](auto& io, auto& c) {
  io.Hex("comm", c.comm_id, Need::kRequired);
  io.Bool("p2p", c.p2p, Need::kOptional);
  io.Int("comm_rank", c.comm_rank, Need::kOptional, -1);
  io.Int("comm_size", c.comm_size, Need::kOptional, 0);
};

const auto kMembershipFields = [](auto& io, auto& m) {
  io.Int("rank", m.rank, Need::kRequired, kRankLow);
  io.Int("local_rank", m.local_rank, Need::kOptional, -1);
  io.Int("world_size", m.world_size, Need::kOptional, -1);
  io.Str("node", m.node, Need::kRequired, Empty::kRejected);
  io.Str("host", m.host, Need::kOptional);
  io.Int("pid", m.pid, Need::kOptional, 0);
  io.Int("incarnation", m.incarnation, Need::kOptional);
  io.Custom("state", m.state, Need::kOptional, AsIs, ReadRankState);
  io.Int("unix_ms", m.unix_ms, Need::kOptional, 0);
  io.Objects("comms", m.comms, Need::kOptional, kCommMemberFields);
  io.If(m.step >= 0).Int("step", m.step, Need::kOptional, -1);
  io.If(m.restored_step >= -1).Int("restored_step", m.restored_step, Need::kOptional, -1);
  io.If(m.restored_step >= -1).Int("restore_plan", m.restore_plan, Need::kOptional, 0);
};

}  // namespace

std::string Encode(const Membership& m) { return EncodeFields(m, kMembershipFields); }

Status Decode(std::string_view json, Membership* out) { return DecodeFields(json, out, kMembershipFields); }

// --- TimeoutTable ---------------------------------------------------------------------------

namespace {

OJson FiniteJson(double v) { return Finite(v); }

// A zero timeout would fire on every op.
Status ReadPositiveMs(const Reader& r, const char* key, Need need, double* ms) {
  FT_RETURN_IF_ERROR(r.Num(key, need, ms, 0));
  if (*ms <= 0) return Status::Corrupt(r.Path(key) + ": must be positive");
  return Status::Ok();
}

const auto kTimeoutEntryFields = [](auto& io, auto& e) {
  io.Hex("comm", e.comm_id, Need::kRequired);
  io.Custom("op", e.op, Need::kRequired, OpJson, ReadOp);
  io.Int("bucket", e.bucket, Need::kOptional, 0, 4);
  io.Custom("ms", e.ms, Need::kRequired, FiniteJson, ReadPositiveMs);
};

const auto kTimeoutTableFields = [](auto& io, auto& t) {
  io.Int("version", t.version, Need::kRequired);
  io.Num("default_ms", t.default_ms, Need::kRequired, 0);
  io.Int("unix_ms", t.unix_ms, Need::kOptional, 0);
  io.Objects("entries", t.entries, Need::kOptional, kTimeoutEntryFields);
};

}  // namespace

std::string Encode(const TimeoutTable& t) { return EncodeFields(t, kTimeoutTableFields); }

Status Decode(std::string_view json, TimeoutTable* out) { return DecodeFields(json, out, kTimeoutTableFields); }

// --- Command --------------------------------------------------------------------------------

namespace {

const auto kRankIncarnationFields = [](auto& io, auto& ri) {
  io.Int("rank", ri.rank, Need::kRequired, 0);
  io.Int("incarnation", ri.incarnation, Need::kRequired);
};

const auto kCommandFields = [](auto& io, auto& c) {
  io.Str("id", c.id, Need::kRequired, Empty::kRejected);
  io.Str("kind", c.kind, Need::kRequired, Empty::kRejected);
  io.Int("rank", c.rank, Need::kOptional, -1);
  io.Str("text", c.text, Need::kOptional);
  io.Num("grace_s", c.grace_s, Need::kOptional, 0);
  io.Int("unix_ms", c.unix_ms, Need::kOptional, 0);
  io.If(c.decided_unix_ms != 0).Int("decided_unix_ms", c.decided_unix_ms, Need::kOptional, 0);
  io.If(!c.incarnations.empty()).Objects("incarnations", c.incarnations, Need::kOptional, kRankIncarnationFields);
};

}  // namespace

std::string Encode(const Command& c) { return EncodeFields(c, kCommandFields); }

Status Decode(std::string_view json, Command* out) { return DecodeFields(json, out, kCommandFields); }

// --- Incident -------------------------------------------------------------------------------

namespace {

Status ReadIncidentKind(const Reader& r, const char* key, Need need, std::string* kind) {
  FT_RETURN_IF_ERROR(r.Str(key, need, kind, Empty::kRejected));
  if (ParseIncidentKind(*kind)) return Status::Ok();
  return Status::Corrupt(r.Path(key) + ": unknown incident kind '" + kind->substr(0, 16) +
                         "' (hang, host-frozen, crash, transport-hang, busy, straggler, sdc, "
                         "restore-mismatch, slow-link, job-slow, hardware)");
}

const auto kSuspectFields = [](auto& io, auto& s) {
  io.Int("rank", s.rank, Need::kOptional, -1);
  io.Str("node", s.node, Need::kOptional);
  io.Str("why", s.why, Need::kOptional);
};

const auto kEvictionFields = [](auto& io, auto& e) {
  io.Str("node", e.node, Need::kRequired, Empty::kRejected);
  io.Str("why", e.why, Need::kOptional);
};

const auto kIncidentFields = [](auto& io, auto& i) {
  io.Str("id", i.id, Need::kRequired, Empty::kRejected);
  io.Custom("kind", i.kind, Need::kRequired, AsIs, ReadIncidentKind);
  io.Objects("suspects", i.suspects, Need::kOptional, kSuspectFields);
  io.If(Is(i, IncidentKind::kTransportHang) || i.comm_id != 0).Hex("comm", i.comm_id, Need::kOptional);
  io.Strs("evidence", i.evidence, Need::kOptional);
  io.If(!i.hardware.empty()).Objects("hardware", i.hardware, Need::kOptional, kHwSignalFields);
  io.If(i.hardware_checked).Bool("hardware_checked", i.hardware_checked, Need::kOptional);
  io.Num("confidence", i.confidence, Need::kOptional, 0, 1);
  io.Int("first_event_unix_ms", i.first_event_unix_ms, Need::kOptional, 0);
  io.Int("window_closed_unix_ms", i.window_closed_unix_ms, Need::kOptional, 0);
  io.Int("decided_unix_ms", i.decided_unix_ms, Need::kOptional, 0);
  io.Num("decide_ms", i.decide_ms, Need::kOptional, 0);
  io.Str("decision", i.decision, Need::kOptional);
  io.If(!i.evicted.empty()).Objects("evicted", i.evicted, Need::kOptional, kEvictionFields);
  io.Str("message", i.message, Need::kOptional);
};

}  // namespace

std::string Encode(const Incident& i) { return EncodeFields(i, kIncidentFields); }

Status Decode(std::string_view json, Incident* out) { return DecodeFields(json, out, kIncidentFields); }

// --- WorkerHeartbeat ------------------------------------------------------------------------

namespace {

const auto kHeartbeatFields = [](auto& io, auto& h) {
  io.Str("node", h.node, Need::kRequired, Empty::kRejected);
  io.Str("host", h.host, Need::kOptional);
  io.Int("pid", h.pid, Need::kOptional, 0);
  io.Ints("ranks", h.ranks, Need::kOptional, kRankLow);
  io.Int("unix_ms", h.unix_ms, Need::kRequired, 0);
};

}  // namespace

std::string Encode(const WorkerHeartbeat& h) { return EncodeFields(h, kHeartbeatFields); }

Status Decode(std::string_view json, WorkerHeartbeat* out) { return DecodeFields(json, out, kHeartbeatFields); }

}  // namespace ft::proto
