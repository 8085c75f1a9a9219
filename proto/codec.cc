#include "proto/codec.h"

#include <algorithm>

#include <cfloat>
#include <cmath>
#include <exception>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>
#include <utility>

#include "proto/json_codec.h"

namespace ft::proto {
namespace {

using namespace ft::proto::json;  // NOLINT: the codec's vocabulary (json_codec.h)

OJson CommRowJson(const CommRow& r) {
  OJson j = OJson::object();
  j["comm"] = CommIdHex(r.comm_id);
  j["p2p"] = r.p2p;
  j["comm_rank"] = r.comm_rank;
  j["comm_size"] = r.comm_size;
  j["op"] = OpKindName(r.op);
  j["bytes"] = r.bytes;
  j["peer"] = r.peer;
  j["entered"] = r.entered_seq;
  j["started"] = r.started_seq;
  j["completed"] = r.completed_seq;
  j["entered_age_ms"] = Finite(r.entered_age_ms);
  j["started_age_ms"] = Finite(r.started_age_ms);
  j["completed_age_ms"] = Finite(r.completed_age_ms);
  return j;
}

void PutProgress(const RankProgress& p, OJson* j) {
  (*j)["rank"] = p.rank;
  (*j)["node"] = p.node;
  (*j)["pid"] = p.pid;
  (*j)["incarnation"] = p.incarnation;
  (*j)["state"] = p.state;
  (*j)["observed_unix_ms"] = p.observed_unix_ms;
  (*j)["last_call_age_ms"] = Finite(p.last_call_age_ms);
  (*j)["blocked_ms"] = Finite(p.blocked_ms);
  (*j)["cpu_pct"] = Finite(p.cpu_pct);
  (*j)["busy"] = p.busy;
  if (!p.proc_state.empty()) (*j)["proc_state"] = p.proc_state;
  (*j)["heartbeat_age_ms"] = Finite(p.heartbeat_age_ms);
  (*j)["frozen"] = p.frozen;
  OJson comms = OJson::array();
  for (const CommRow& r : p.comms) comms.push_back(CommRowJson(r));
  (*j)["comms"] = std::move(comms);
}

constexpr int64_t kRankLow = -1;  // -1: unknown rank (a process whose launcher said nothing)

// A rank state is one of RankState's names (messages.h); "" only where the field is optional.
Status CheckRankState(const Reader& r, const std::string& state) {
  if (state.empty() || ParseRankState(state).has_value()) return Status::Ok();
  return Status::Corrupt(r.Path("state") + ": unknown rank state '" + state.substr(0, 16) +
                         "' (running, disabled, exited, dead, stopped)");
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
Status ReadOp(const Reader& r, Need need, OpKind* out) {
  std::string name;
  FT_RETURN_IF_ERROR(r.Str("op", need, &name, need == Need::kRequired ? Empty::kRejected : Empty::kAllowed));
  if (name.empty()) return Status::Ok();
  std::optional<OpKind> kind = ParseOpKind(name);
  if (!kind.has_value() && LooksLikeOpName(name)) kind = OpKind::kOther;
  if (!kind.has_value()) return UnknownName(r.Path("op"), "op kind", name, kOpKinds, OpKindName);
  *out = *kind;
  return Status::Ok();
}

Status ReadCommRow(const Reader& r, CommRow* c) {
  FT_RETURN_IF_ERROR(r.Hex("comm", Need::kRequired, &c->comm_id));
  FT_RETURN_IF_ERROR(r.Bool("p2p", Need::kOptional, &c->p2p));
  FT_RETURN_IF_ERROR(r.Int("comm_rank", Need::kOptional, &c->comm_rank, -1));
  FT_RETURN_IF_ERROR(r.Int("comm_size", Need::kOptional, &c->comm_size, 0));
  FT_RETURN_IF_ERROR(ReadOp(r, Need::kOptional, &c->op));
  FT_RETURN_IF_ERROR(r.Int("bytes", Need::kOptional, &c->bytes));
  FT_RETURN_IF_ERROR(r.Int("peer", Need::kOptional, &c->peer, -1));
  FT_RETURN_IF_ERROR(r.Int("entered", Need::kRequired, &c->entered_seq));
  FT_RETURN_IF_ERROR(r.Int("started", Need::kRequired, &c->started_seq));
  FT_RETURN_IF_ERROR(r.Int("completed", Need::kRequired, &c->completed_seq));
  FT_RETURN_IF_ERROR(r.Num("entered_age_ms", Need::kOptional, &c->entered_age_ms, -1));
  FT_RETURN_IF_ERROR(r.Num("started_age_ms", Need::kOptional, &c->started_age_ms, -1));
  FT_RETURN_IF_ERROR(r.Num("completed_age_ms", Need::kOptional, &c->completed_age_ms, -1));
  return Status::Ok();
}

Status ReadProgress(const Reader& r, RankProgress* p) {
  FT_RETURN_IF_ERROR(r.Int("rank", Need::kRequired, &p->rank, kRankLow));
  FT_RETURN_IF_ERROR(r.Str("node", Need::kRequired, &p->node, Empty::kRejected));
  FT_RETURN_IF_ERROR(r.Int("pid", Need::kOptional, &p->pid, 0));
  FT_RETURN_IF_ERROR(r.Int("incarnation", Need::kOptional, &p->incarnation));
  FT_RETURN_IF_ERROR(r.Str("state", Need::kRequired, &p->state, Empty::kRejected));
  FT_RETURN_IF_ERROR(CheckRankState(r, p->state));
  FT_RETURN_IF_ERROR(r.Int("observed_unix_ms", Need::kRequired, &p->observed_unix_ms, 0));
  FT_RETURN_IF_ERROR(r.Num("last_call_age_ms", Need::kOptional, &p->last_call_age_ms, -1));
  FT_RETURN_IF_ERROR(r.Num("blocked_ms", Need::kOptional, &p->blocked_ms, 0));
  FT_RETURN_IF_ERROR(r.Num("cpu_pct", Need::kOptional, &p->cpu_pct, 0));
  FT_RETURN_IF_ERROR(r.Bool("busy", Need::kOptional, &p->busy));
  FT_RETURN_IF_ERROR(r.Str("proc_state", Need::kOptional, &p->proc_state));
  FT_RETURN_IF_ERROR(r.Num("heartbeat_age_ms", Need::kOptional, &p->heartbeat_age_ms, -1));
  FT_RETURN_IF_ERROR(r.Bool("frozen", Need::kOptional, &p->frozen));
  return r.Objects("comms", Need::kOptional, &p->comms, ReadCommRow);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

std::string CommIdHex(uint64_t id) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, id >>= 4) out[static_cast<size_t>(i)] = kDigits[id & 0xf];
  return out;
}

bool ParseCommIdHex(std::string_view text, uint64_t* id) {
  if (text.size() != 16) return false;
  uint64_t value = 0;
  for (char c : text) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return false;
    }
    value = (value << 4) | static_cast<uint64_t>(digit);
  }
  *id = value;
  return true;
}

std::string SuspectsField(const std::vector<Suspect>& suspects) {
  std::string out;
  for (const Suspect& s : suspects) {
    if (!out.empty()) out += ',';
    out += std::to_string(s.rank) + "@" + s.node;
  }
  return out;
}

// --- RankProgress ---------------------------------------------------------------------------

std::string Encode(const RankProgress& value) {
  OJson j = Versioned();
  PutProgress(value, &j);
  return Dump(j);
}

Status Decode(std::string_view json, RankProgress* out) {
  return DecodeValue(json, out, ReadProgress);
}

// --- HwSignal (inside an Event and an Incident) -------------------------------------------

namespace {

OJson HwSignalJson(const HwSignal& h) {
  OJson o = OJson::object();
  if (!h.node.empty()) o["node"] = h.node;
  o["source"] = h.source;
  o["device"] = h.device;
  o["kind"] = h.kind;
  o["value"] = h.value;
  o["total"] = h.total;
  o["critical"] = h.critical;
  if (!h.ranks.empty()) o["ranks"] = h.ranks;
  if (h.pid != 0) o["pid"] = h.pid;
  o["unix_ms"] = h.unix_ms;
  o["detail"] = h.detail;
  return o;
}

Status ReadHwSignal(const Reader& r, HwSignal* h) {
  FT_RETURN_IF_ERROR(r.Str("node", Need::kOptional, &h->node));
  FT_RETURN_IF_ERROR(r.Str("source", Need::kRequired, &h->source, Empty::kRejected));
  FT_RETURN_IF_ERROR(r.Str("device", Need::kOptional, &h->device));
  FT_RETURN_IF_ERROR(r.Str("kind", Need::kRequired, &h->kind, Empty::kRejected));
  FT_RETURN_IF_ERROR(r.Int("value", Need::kOptional, &h->value));
  FT_RETURN_IF_ERROR(r.Int("total", Need::kOptional, &h->total));
  FT_RETURN_IF_ERROR(r.Bool("critical", Need::kOptional, &h->critical));
  FT_RETURN_IF_ERROR(r.List("ranks", Need::kOptional, &h->ranks, [](Elem e, const FieldPath& path, int* rank) {
    return CheckInt(e, path, rank, 0);
  }));
  FT_RETURN_IF_ERROR(r.Int("pid", Need::kOptional, &h->pid, 0));
  FT_RETURN_IF_ERROR(r.Int("unix_ms", Need::kOptional, &h->unix_ms, 0));
  return r.Str("detail", Need::kOptional, &h->detail);
}

}  // namespace

// --- Event ----------------------------------------------------------------------------------

std::string Encode(const Event& e) {
  OJson j = Versioned();
  j["kind"] = e.kind;
  j["rank"] = e.rank;
  j["node"] = e.node;
  j["unix_ms"] = e.unix_ms;
  j["message"] = e.message;
  // Fields of the event's kind always; the others only when set (so nothing is lost, and a
  // person reading redis-cli sees only what matters for this kind).
  const bool timeout = Is(e, EventKind::kTimeout), error = Is(e, EventKind::kError),
             exit = Is(e, EventKind::kExit), slow = Is(e, EventKind::kSlowdown);
  if (timeout || e.comm_id != 0) j["comm"] = CommIdHex(e.comm_id);
  if (timeout || e.op != OpKind::kNone) j["op"] = OpKindName(e.op);
  if (timeout || e.seq != 0) j["seq"] = e.seq;
  if (timeout || e.age_ms != 0) j["age_ms"] = Finite(e.age_ms);
  if (timeout || e.timeout_ms != 0) j["timeout_ms"] = Finite(e.timeout_ms);
  if (timeout || e.started) j["started"] = e.started;
  if (error || !e.api.empty()) j["api"] = e.api;
  if (error || !e.call.empty()) j["call"] = e.call;
  if (error || exit || e.code != 0) j["code"] = e.code;
  if (exit || e.clean) j["clean"] = e.clean;
  if (e.terminated_by_signal != 0) j["terminated_by_signal"] = e.terminated_by_signal;
  if (e.status_unknown) j["status_unknown"] = true;
  if (e.terminate_unix_ms != 0) j["terminate_unix_ms"] = e.terminate_unix_ms;
  if (slow || e.step_ms != 0) j["step_ms"] = Finite(e.step_ms);
  if (slow || e.baseline_ms != 0) j["baseline_ms"] = Finite(e.baseline_ms);
  if (slow || e.compute_ms != 0) j["compute_ms"] = Finite(e.compute_ms);
  if (Is(e, EventKind::kHardware) || !(e.hw == HwSignal{})) j["hw"] = HwSignalJson(e.hw);
  // Workers always attach the progress table; a value decoded without one stays without one.
  if (!(e.progress == RankProgress{})) {
    OJson progress = OJson::object();
    PutProgress(e.progress, &progress);
    j["progress"] = std::move(progress);
  }
  return Dump(j);
}

Status Decode(std::string_view json, Event* out) {
  return DecodeValue(json, out, [](const Reader& r, Event* e) -> Status {
    FT_RETURN_IF_ERROR(r.Str("kind", Need::kRequired, &e->kind, Empty::kRejected));
    if (!ParseEventKind(e->kind)) {
      return Status::Corrupt(r.Path("kind") + ": unknown event kind '" + e->kind.substr(0, 16) +
                             "' (timeout, error, exit, slowdown, busy, frozen, hardware)");
    }
    FT_RETURN_IF_ERROR(r.Int("rank", Need::kRequired, &e->rank, kRankLow));
    FT_RETURN_IF_ERROR(r.Str("node", Need::kRequired, &e->node, Empty::kRejected));
    FT_RETURN_IF_ERROR(r.Int("unix_ms", Need::kRequired, &e->unix_ms, 0));
    FT_RETURN_IF_ERROR(r.Str("message", Need::kOptional, &e->message));
    FT_RETURN_IF_ERROR(r.Hex("comm", Need::kOptional, &e->comm_id));
    FT_RETURN_IF_ERROR(ReadOp(r, Need::kOptional, &e->op));
    FT_RETURN_IF_ERROR(r.Int("seq", Need::kOptional, &e->seq));
    FT_RETURN_IF_ERROR(r.Num("age_ms", Need::kOptional, &e->age_ms, 0));
    FT_RETURN_IF_ERROR(r.Num("timeout_ms", Need::kOptional, &e->timeout_ms, 0));
    FT_RETURN_IF_ERROR(r.Bool("started", Need::kOptional, &e->started));
    FT_RETURN_IF_ERROR(r.Str("api", Need::kOptional, &e->api));
    FT_RETURN_IF_ERROR(r.Str("call", Need::kOptional, &e->call));
    FT_RETURN_IF_ERROR(r.Int("code", Need::kOptional, &e->code));
    FT_RETURN_IF_ERROR(r.Bool("clean", Need::kOptional, &e->clean));
    FT_RETURN_IF_ERROR(r.Bool("status_unknown", Need::kOptional, &e->status_unknown));
    FT_RETURN_IF_ERROR(r.Int("terminated_by_signal", Need::kOptional, &e->terminated_by_signal, 0, 128));
    FT_RETURN_IF_ERROR(r.Int("terminate_unix_ms", Need::kOptional, &e->terminate_unix_ms, 0));
    FT_RETURN_IF_ERROR(r.Num("step_ms", Need::kOptional, &e->step_ms, 0));
    FT_RETURN_IF_ERROR(r.Num("baseline_ms", Need::kOptional, &e->baseline_ms, 0));
    FT_RETURN_IF_ERROR(r.Num("compute_ms", Need::kOptional, &e->compute_ms, 0));
    FT_RETURN_IF_ERROR(r.Object("hw", Is(*e, EventKind::kHardware) ? Need::kRequired : Need::kOptional,
                                [&](const Reader& h) { return ReadHwSignal(h, &e->hw); }));
    return r.Object("progress", Need::kOptional,
                    [&](const Reader& p) { return ReadProgress(p, &e->progress); });
  });
}

// --- RankSummary ----------------------------------------------------------------------------

std::string Encode(const RankSummary& s) {
  OJson j = Versioned();
  j["rank"] = s.rank;
  j["node"] = s.node;
  j["unix_ms"] = s.unix_ms;
  j["steps"] = s.steps;
  j["step_ms"] = Finite(s.step_ms);
  j["step_p50_ms"] = Finite(s.step_p50_ms);
  j["compute_ms"] = Finite(s.compute_ms);
  j["comm_wait_ms"] = Finite(s.comm_wait_ms);
  j["records"] = s.records;
  j["dropped"] = s.dropped;
  OJson ops = OJson::array();
  for (const OpSummary& o : s.ops) {
    OJson op = OJson::object();
    op["comm"] = CommIdHex(o.comm_id);
    op["op"] = OpKindName(o.op);
    op["bucket"] = o.bucket;
    op["count"] = o.count;
    op["p50_ms"] = Finite(o.p50_ms);
    op["p99_ms"] = Finite(o.p99_ms);
    op["max_ms"] = Finite(o.max_ms);
    op["last_seq"] = o.last_seq;
    ops.push_back(std::move(op));
  }
  j["ops"] = std::move(ops);
  j["kernels"] = s.kernels;
  OJson kernels = OJson::array();
  for (const KernelSummary& k : s.kernel_samples) {
    OJson kernel = OJson::object();
    kernel["name"] = k.name;
    kernel["count"] = k.count;
    kernel["p50_ms"] = Finite(k.p50_ms);
    kernel["max_ms"] = Finite(k.max_ms);
    kernels.push_back(std::move(kernel));
  }
  j["kernel_samples"] = std::move(kernels);
  if (s.declared_step >= 0) j["declared_step"] = s.declared_step;
  if (s.total_steps > 0) j["total_steps"] = s.total_steps;
  return Dump(j);
}

Status Decode(std::string_view json, RankSummary* out) {
  return DecodeValue(json, out, [](const Reader& r, RankSummary* s) -> Status {
    FT_RETURN_IF_ERROR(r.Int("rank", Need::kRequired, &s->rank, kRankLow));
    FT_RETURN_IF_ERROR(r.Str("node", Need::kRequired, &s->node, Empty::kRejected));
    FT_RETURN_IF_ERROR(r.Int("unix_ms", Need::kRequired, &s->unix_ms, 0));
    FT_RETURN_IF_ERROR(r.Int("steps", Need::kOptional, &s->steps));
    FT_RETURN_IF_ERROR(r.Num("step_ms", Need::kOptional, &s->step_ms, 0));
    FT_RETURN_IF_ERROR(r.Num("step_p50_ms", Need::kOptional, &s->step_p50_ms, 0));
    FT_RETURN_IF_ERROR(r.Num("compute_ms", Need::kOptional, &s->compute_ms, 0));
    FT_RETURN_IF_ERROR(r.Num("comm_wait_ms", Need::kOptional, &s->comm_wait_ms, 0));
    FT_RETURN_IF_ERROR(r.Int("records", Need::kOptional, &s->records));
    FT_RETURN_IF_ERROR(r.Int("dropped", Need::kOptional, &s->dropped));
    FT_RETURN_IF_ERROR(r.Int("kernels", Need::kOptional, &s->kernels));
    FT_RETURN_IF_ERROR(r.Int("declared_step", Need::kOptional, &s->declared_step, -1));
    FT_RETURN_IF_ERROR(r.Int("total_steps", Need::kOptional, &s->total_steps, 0));
    FT_RETURN_IF_ERROR(r.Objects("kernel_samples", Need::kOptional, &s->kernel_samples,
                                 [](const Reader& k, KernelSummary* kernel) {
      FT_RETURN_IF_ERROR(k.Str("name", Need::kRequired, &kernel->name, Empty::kRejected));
      FT_RETURN_IF_ERROR(k.Int("count", Need::kOptional, &kernel->count));
      FT_RETURN_IF_ERROR(k.Num("p50_ms", Need::kOptional, &kernel->p50_ms, 0));
      return k.Num("max_ms", Need::kOptional, &kernel->max_ms, 0);
    }));
    return r.Objects("ops", Need::kOptional, &s->ops, [](const Reader& o, OpSummary* op) {
      FT_RETURN_IF_ERROR(o.Hex("comm", Need::kRequired, &op->comm_id));
      FT_RETURN_IF_ERROR(ReadOp(o, Need::kRequired, &op->op));
      FT_RETURN_IF_ERROR(o.Int("bucket", Need::kOptional, &op->bucket, 0, 4));
      FT_RETURN_IF_ERROR(o.Int("count", Need::kOptional, &op->count));
      FT_RETURN_IF_ERROR(o.Num("p50_ms", Need::kOptional, &op->p50_ms, 0));
      FT_RETURN_IF_ERROR(o.Num("p99_ms", Need::kOptional, &op->p99_ms, 0));
      FT_RETURN_IF_ERROR(o.Num("max_ms", Need::kOptional, &op->max_ms, 0));
      return o.Int("last_seq", Need::kOptional, &op->last_seq);
    });
  });
}

// --- Membership -----------------------------------------------------------------------------

std::string Encode(const Membership& m) {
  OJson j = Versioned();
  j["rank"] = m.rank;
  j["local_rank"] = m.local_rank;
  j["world_size"] = m.world_size;
  j["node"] = m.node;
  j["host"] = m.host;
  j["pid"] = m.pid;
  j["incarnation"] = m.incarnation;
  j["state"] = m.state;
  j["unix_ms"] = m.unix_ms;
  OJson comms = OJson::array();
  for (const CommMember& c : m.comms) {
    OJson e = OJson::object();
    e["comm"] = CommIdHex(c.comm_id);
    e["p2p"] = c.p2p;
    e["comm_rank"] = c.comm_rank;
    e["comm_size"] = c.comm_size;
    comms.push_back(std::move(e));
  }
  j["comms"] = std::move(comms);
  if (m.step >= 0) j["step"] = m.step;
  if (m.restored_step >= -1) {
    j["restored_step"] = m.restored_step;
    j["restore_plan"] = m.restore_plan;
  }
  return Dump(j);
}

Status Decode(std::string_view json, Membership* out) {
  return DecodeValue(json, out, [](const Reader& r, Membership* m) -> Status {
    FT_RETURN_IF_ERROR(r.Int("rank", Need::kRequired, &m->rank, kRankLow));
    FT_RETURN_IF_ERROR(r.Int("local_rank", Need::kOptional, &m->local_rank, -1));
    FT_RETURN_IF_ERROR(r.Int("world_size", Need::kOptional, &m->world_size, -1));
    FT_RETURN_IF_ERROR(r.Str("node", Need::kRequired, &m->node, Empty::kRejected));
    FT_RETURN_IF_ERROR(r.Str("host", Need::kOptional, &m->host));
    FT_RETURN_IF_ERROR(r.Int("pid", Need::kOptional, &m->pid, 0));
    FT_RETURN_IF_ERROR(r.Int("incarnation", Need::kOptional, &m->incarnation));
    FT_RETURN_IF_ERROR(r.Str("state", Need::kOptional, &m->state));
    FT_RETURN_IF_ERROR(CheckRankState(r, m->state));
    FT_RETURN_IF_ERROR(r.Int("unix_ms", Need::kOptional, &m->unix_ms, 0));
    FT_RETURN_IF_ERROR(r.Int("step", Need::kOptional, &m->step, -1));
    FT_RETURN_IF_ERROR(r.Int("restored_step", Need::kOptional, &m->restored_step, -1));
    FT_RETURN_IF_ERROR(r.Int("restore_plan", Need::kOptional, &m->restore_plan, 0));
    return r.Objects("comms", Need::kOptional, &m->comms, [](const Reader& c, CommMember* cm) {
      FT_RETURN_IF_ERROR(c.Hex("comm", Need::kRequired, &cm->comm_id));
      FT_RETURN_IF_ERROR(c.Bool("p2p", Need::kOptional, &cm->p2p));
      FT_RETURN_IF_ERROR(c.Int("comm_rank", Need::kOptional, &cm->comm_rank, -1));
      return c.Int("comm_size", Need::kOptional, &cm->comm_size, 0);
    });
  });
}

// --- TimeoutTable ---------------------------------------------------------------------------

std::string Encode(const TimeoutTable& t) {
  OJson j = Versioned();
  j["version"] = t.version;
  j["default_ms"] = Finite(t.default_ms);
  j["unix_ms"] = t.unix_ms;
  OJson entries = OJson::array();
  for (const TimeoutEntry& e : t.entries) {
    OJson o = OJson::object();
    o["comm"] = CommIdHex(e.comm_id);
    o["op"] = OpKindName(e.op);
    o["bucket"] = e.bucket;
    o["ms"] = Finite(e.ms);
    entries.push_back(std::move(o));
  }
  j["entries"] = std::move(entries);
  return Dump(j);
}

Status Decode(std::string_view json, TimeoutTable* out) {
  return DecodeValue(json, out, [](const Reader& r, TimeoutTable* t) -> Status {
    FT_RETURN_IF_ERROR(r.Int("version", Need::kRequired, &t->version));
    FT_RETURN_IF_ERROR(r.Num("default_ms", Need::kRequired, &t->default_ms, 0));
    FT_RETURN_IF_ERROR(r.Int("unix_ms", Need::kOptional, &t->unix_ms, 0));
    return r.Objects("entries", Need::kOptional, &t->entries,
                     [](const Reader& o, TimeoutEntry* e) -> Status {
                       FT_RETURN_IF_ERROR(o.Hex("comm", Need::kRequired, &e->comm_id));
                       FT_RETURN_IF_ERROR(ReadOp(o, Need::kRequired, &e->op));
                       FT_RETURN_IF_ERROR(o.Int("bucket", Need::kOptional, &e->bucket, 0, 4));
                       FT_RETURN_IF_ERROR(o.Num("ms", Need::kRequired, &e->ms, 0));
                       // A zero timeout would fire on every op.
                       if (e->ms <= 0) return Status::Corrupt(o.Path("ms") + ": must be positive");
                       return Status::Ok();
                     });
  });
}

// --- Command --------------------------------------------------------------------------------

std::string Encode(const Command& c) {
  OJson j = Versioned();
  j["id"] = c.id;
  j["kind"] = c.kind;
  j["rank"] = c.rank;
  j["text"] = c.text;
  j["grace_s"] = Finite(c.grace_s);
  j["unix_ms"] = c.unix_ms;
  if (c.decided_unix_ms != 0) j["decided_unix_ms"] = c.decided_unix_ms;
  if (!c.incarnations.empty()) {
    OJson list = OJson::array();
    for (const RankIncarnation& ri : c.incarnations) {
      OJson e = OJson::object();
      e["rank"] = ri.rank;
      e["incarnation"] = ri.incarnation;
      list.push_back(std::move(e));
    }
    j["incarnations"] = std::move(list);
  }
  return Dump(j);
}

Status Decode(std::string_view json, Command* out) {
  return DecodeValue(json, out, [](const Reader& r, Command* c) -> Status {
    FT_RETURN_IF_ERROR(r.Str("id", Need::kRequired, &c->id, Empty::kRejected));
    FT_RETURN_IF_ERROR(r.Str("kind", Need::kRequired, &c->kind, Empty::kRejected));
    FT_RETURN_IF_ERROR(r.Int("rank", Need::kOptional, &c->rank, -1));
    FT_RETURN_IF_ERROR(r.Str("text", Need::kOptional, &c->text));
    FT_RETURN_IF_ERROR(r.Num("grace_s", Need::kOptional, &c->grace_s, 0));
    FT_RETURN_IF_ERROR(r.Objects("incarnations", Need::kOptional, &c->incarnations,
                                 [](const Reader& o, RankIncarnation* ri) -> Status {
                                   FT_RETURN_IF_ERROR(o.Int("rank", Need::kRequired, &ri->rank, 0));
                                   return o.Int("incarnation", Need::kRequired, &ri->incarnation);
                                 }));
    FT_RETURN_IF_ERROR(r.Int("decided_unix_ms", Need::kOptional, &c->decided_unix_ms, 0));
    return r.Int("unix_ms", Need::kOptional, &c->unix_ms, 0);
  });
}

// --- Incident -------------------------------------------------------------------------------

std::string Encode(const Incident& i) {
  OJson j = Versioned();
  j["id"] = i.id;
  j["kind"] = i.kind;
  OJson suspects = OJson::array();
  for (const Suspect& s : i.suspects) {
    OJson o = OJson::object();
    o["rank"] = s.rank;
    o["node"] = s.node;
    o["why"] = s.why;
    suspects.push_back(std::move(o));
  }
  j["suspects"] = std::move(suspects);
  if (Is(i, IncidentKind::kTransportHang) || i.comm_id != 0) j["comm"] = CommIdHex(i.comm_id);
  j["evidence"] = i.evidence;
  if (!i.hardware.empty()) {
    OJson hardware = OJson::array();
    for (const HwSignal& h : i.hardware) hardware.push_back(HwSignalJson(h));
    j["hardware"] = std::move(hardware);
  }
  if (i.hardware_checked) j["hardware_checked"] = true;
  j["confidence"] = Finite(i.confidence);
  j["first_event_unix_ms"] = i.first_event_unix_ms;
  j["window_closed_unix_ms"] = i.window_closed_unix_ms;
  j["decided_unix_ms"] = i.decided_unix_ms;
  j["decide_ms"] = Finite(i.decide_ms);
  j["decision"] = i.decision;
  if (!i.evicted.empty()) {
    OJson evicted = OJson::array();
    for (const Eviction& e : i.evicted) evicted.push_back(OJson{{"node", e.node}, {"why", e.why}});
    j["evicted"] = std::move(evicted);
  }
  j["message"] = i.message;
  return Dump(j);
}

Status Decode(std::string_view json, Incident* out) {
  return DecodeValue(json, out, [](const Reader& r, Incident* i) -> Status {
    FT_RETURN_IF_ERROR(r.Str("id", Need::kRequired, &i->id, Empty::kRejected));
    FT_RETURN_IF_ERROR(r.Str("kind", Need::kRequired, &i->kind, Empty::kRejected));
    if (!ParseIncidentKind(i->kind)) {
      return Status::Corrupt(r.Path("kind") + ": unknown incident kind '" + i->kind.substr(0, 16) +
                             "' (hang, host-frozen, crash, transport-hang, busy, straggler, sdc, "
                             "restore-mismatch, slow-link, job-slow, hardware)");
    }
    FT_RETURN_IF_ERROR(r.Objects("suspects", Need::kOptional, &i->suspects,
                                 [](const Reader& o, Suspect* s) -> Status {
                                   FT_RETURN_IF_ERROR(o.Int("rank", Need::kOptional, &s->rank, -1));
                                   FT_RETURN_IF_ERROR(o.Str("node", Need::kOptional, &s->node));
                                   return o.Str("why", Need::kOptional, &s->why);
                                 }));
    FT_RETURN_IF_ERROR(r.Hex("comm", Need::kOptional, &i->comm_id));
    FT_RETURN_IF_ERROR(r.List("evidence", Need::kOptional, &i->evidence,
                              [](Elem e, const FieldPath& path, std::string* s) {
                                return CheckStr(e, path, s);
                              }));
    FT_RETURN_IF_ERROR(r.Objects("hardware", Need::kOptional, &i->hardware, ReadHwSignal));
    FT_RETURN_IF_ERROR(r.Bool("hardware_checked", Need::kOptional, &i->hardware_checked));
    FT_RETURN_IF_ERROR(r.Num("confidence", Need::kOptional, &i->confidence, 0, 1));
    FT_RETURN_IF_ERROR(r.Int("first_event_unix_ms", Need::kOptional, &i->first_event_unix_ms, 0));
    FT_RETURN_IF_ERROR(r.Int("window_closed_unix_ms", Need::kOptional, &i->window_closed_unix_ms, 0));
    FT_RETURN_IF_ERROR(r.Int("decided_unix_ms", Need::kOptional, &i->decided_unix_ms, 0));
    FT_RETURN_IF_ERROR(r.Num("decide_ms", Need::kOptional, &i->decide_ms, 0));
    FT_RETURN_IF_ERROR(r.Str("decision", Need::kOptional, &i->decision));
    FT_RETURN_IF_ERROR(r.Objects("evicted", Need::kOptional, &i->evicted, [](const Reader& o, Eviction* e) -> Status {
      FT_RETURN_IF_ERROR(o.Str("node", Need::kRequired, &e->node, Empty::kRejected));
      return o.Str("why", Need::kOptional, &e->why);
    }));
    return r.Str("message", Need::kOptional, &i->message);
  });
}

// --- WorkerHeartbeat ------------------------------------------------------------------------

std::string Encode(const WorkerHeartbeat& h) {
  OJson j = Versioned();
  j["node"] = h.node;
  j["host"] = h.host;
  j["pid"] = h.pid;
  j["ranks"] = h.ranks;
  j["unix_ms"] = h.unix_ms;
  return Dump(j);
}

Status Decode(std::string_view json, WorkerHeartbeat* out) {
  return DecodeValue(json, out, [](const Reader& r, WorkerHeartbeat* h) -> Status {
    FT_RETURN_IF_ERROR(r.Str("node", Need::kRequired, &h->node, Empty::kRejected));
    FT_RETURN_IF_ERROR(r.Str("host", Need::kOptional, &h->host));
    FT_RETURN_IF_ERROR(r.Int("pid", Need::kOptional, &h->pid, 0));
    FT_RETURN_IF_ERROR(r.List("ranks", Need::kOptional, &h->ranks,
                              [](Elem e, const FieldPath& path, int* rank) {
                                return CheckInt(e, path, rank, kRankLow);
                              }));
    return r.Int("unix_ms", Need::kRequired, &h->unix_ms, 0);
  });
}

}  // namespace ft::proto
