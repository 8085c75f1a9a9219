// Stream capture and graphs. A capturing stream appends its Ops to a graph (a list, in
// capture order: only single-stream capture is simulated); an instantiated graph is an
// immutable list that cudaGraphLaunch queues as one GraphOp, replayed on the stream's worker.
#include <cstring>

#include "runtime.h"

struct CUgraph_st {
  static constexpr uint32_t kMagic = 0x47524150;  // "GRAP"
  uint32_t magic = kMagic;
  std::vector<gpusim::OpBox> ops;
};

struct CUgraphExec_st {
  static constexpr uint32_t kMagic = 0x47455845;  // "GEXE"
  uint32_t magic = kMagic;
  std::shared_ptr<const std::vector<gpusim::OpBox>> body;
};

namespace gpusim {
namespace {

std::atomic<unsigned long long> g_next_capture_id{1};
thread_local cudaStreamCaptureMode t_capture_mode = cudaStreamCaptureModeGlobal;
// Captures begun and not yet ended: lets CheckCaptureSafe answer without a scan when none is.
std::atomic<int> g_active_captures{0};

CUgraph_st* AsGraph(cudaGraph_t g) { return g && g->magic == CUgraph_st::kMagic ? g : nullptr; }
CUgraphExec_st* AsExec(cudaGraphExec_t e) {
  return e && e->magic == CUgraphExec_st::kMagic ? e : nullptr;
}

bool IsEventOp(const Op& op) {
  return std::holds_alternative<EventRecordOp>(op) || std::holds_alternative<EventWaitOp>(op);
}

}  // namespace

cudaError_t AppendCaptured(CUstream_st* s, Op&& op) {
  if (s->capture_status == cudaStreamCaptureStatusInvalidated)
    return cudaErrorStreamCaptureInvalidated;
  if (auto* w = std::get_if<EventWaitOp>(&op)) {
    // Waiting for a record made earlier in this capture is already implied by capture order.
    if (EventCaptureId(w->ev.get()) == s->capture_id) return cudaSuccess;
    w->gen = 0;  // an outside event: the launch snapshots its newest record
  }
  if (auto* r = std::get_if<EventRecordOp>(&op)) r->gen = 0;  // each launch records anew
  s->capture->ops.push_back(OpBox{std::move(op)});
  return cudaSuccess;
}

cudaError_t CheckCaptureSafe() {
  if (g_active_captures.load(std::memory_order_acquire) == 0) return cudaSuccess;
  const cudaStreamCaptureMode mine = t_capture_mode;
  if (mine == cudaStreamCaptureModeRelaxed) return cudaSuccess;
  const std::thread::id me = std::this_thread::get_id();
  bool prohibited = false;
  for (int dev = 0; dev < GetConfig().device_count; ++dev) {
    Device& d = GetDevice(dev);
    std::lock_guard<std::mutex> dl(d.mu);
    for (CUstream_st* b : d.streams) {
      if (!b->capturing.load(std::memory_order_acquire)) continue;
      std::lock_guard<std::mutex> bl(b->mu);
      if (!b->capture || b->capture_status != cudaStreamCaptureStatusActive) continue;
      bool own = b->capture_thread == me && b->capture_mode != cudaStreamCaptureModeRelaxed;
      bool other_global = mine == cudaStreamCaptureModeGlobal && b->capture_thread != me &&
                          b->capture_mode == cudaStreamCaptureModeGlobal;
      if (own || other_global) {
        b->capture_status = cudaStreamCaptureStatusInvalidated;
        prohibited = true;
      }
    }
  }
  return prohibited ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

void RunGraph(CUstream_st* s, const GraphOp& g) {
  GenCursor cursor{g.gens.data(), g.gens.size()};
  for (const OpBox& box : *g.body) Execute(s, box.op, &cursor);
}

void DeleteGraph(CUgraph_st* g) {
  g->magic = 0;
  delete g;
}

namespace api {

cudaError_t StreamBeginCapture(cudaStream_t h, cudaStreamCaptureMode mode, bool pt) {
  CUstream_st* s = ResolveStream(h, pt);
  if (!s) return Ret(cudaErrorInvalidResourceHandle);
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
      mode != cudaStreamCaptureModeRelaxed)
    return Ret(cudaErrorInvalidValue);
  // The legacy stream cannot be captured (it synchronises with everything).
  if (s->legacy) return Ret(cudaErrorStreamCaptureUnsupported);
  std::lock_guard<std::mutex> lk(s->mu);
  if (s->capture) return Ret(cudaErrorIllegalState);
  s->capture = new CUgraph_st;
  s->capture_status = cudaStreamCaptureStatusActive;
  s->capture_id = g_next_capture_id.fetch_add(1);
  s->capture_mode = mode;
  s->capture_thread = std::this_thread::get_id();
  s->capturing.store(true, std::memory_order_release);
  g_active_captures.fetch_add(1, std::memory_order_acq_rel);
  return cudaSuccess;
}

cudaError_t StreamEndCapture(cudaStream_t h, cudaGraph_t* out, bool pt) {
  CUstream_st* s = ResolveStream(h, pt);
  if (!s) return Ret(cudaErrorInvalidResourceHandle);
  if (!out) return Ret(cudaErrorInvalidValue);
  CUgraph_st* g;
  cudaStreamCaptureStatus status;
  {
    std::lock_guard<std::mutex> lk(s->mu);
    if (!s->capture) return Ret(cudaErrorIllegalState);
    if (s->capture_mode != cudaStreamCaptureModeRelaxed &&
        s->capture_thread != std::this_thread::get_id())
      return Ret(cudaErrorStreamCaptureWrongThread);
    g = s->capture;
    status = s->capture_status;
    s->capture = nullptr;
    s->capture_status = cudaStreamCaptureStatusNone;
    s->capturing.store(false, std::memory_order_release);
    g_active_captures.fetch_sub(1, std::memory_order_acq_rel);
  }
  if (status == cudaStreamCaptureStatusInvalidated) {
    DeleteGraph(g);
    *out = nullptr;
    return Ret(cudaErrorStreamCaptureInvalidated);
  }
  *out = g;
  return cudaSuccess;
}

cudaError_t StreamIsCapturing(cudaStream_t h, cudaStreamCaptureStatus* status, bool pt) {
  if (!status) return Ret(cudaErrorInvalidValue);
  CUstream_st* s = ResolveStream(h, pt);
  if (!s) return Ret(cudaErrorInvalidResourceHandle);
  if (s->legacy) {
    // Asking about the legacy stream while a blocking stream captures is an implicit
    // dependency, which CUDA reports as an error.
    Device& d = GetDevice(s->device);
    std::lock_guard<std::mutex> lk(d.mu);
    for (CUstream_st* b : d.streams)
      if (b->blocking() && b->capturing.load(std::memory_order_acquire))
        return Ret(cudaErrorStreamCaptureImplicit);
    *status = cudaStreamCaptureStatusNone;
    return cudaSuccess;
  }
  std::lock_guard<std::mutex> lk(s->mu);
  *status = s->capture ? s->capture_status : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t StreamGetCaptureInfo(cudaStream_t h, cudaStreamCaptureStatus* status,
                                 unsigned long long* id, cudaGraph_t* graph,
                                 const cudaGraphNode_t** deps, const cudaGraphEdgeData** edges,
                                 size_t* num_deps, bool pt) {
  if (!status) return Ret(cudaErrorInvalidValue);
  CUstream_st* s = ResolveStream(h, pt);
  if (!s) return Ret(cudaErrorInvalidResourceHandle);
  if (s->legacy) {
    cudaError_t e = StreamIsCapturing(h, status, pt);
    if (e != cudaSuccess) return e;
  }
  std::lock_guard<std::mutex> lk(s->mu);
  *status = s->capture ? s->capture_status : cudaStreamCaptureStatusNone;
  bool active = s->capture != nullptr;
  if (id && active) *id = s->capture_id;
  if (graph) *graph = active ? s->capture : nullptr;
  // Graph nodes are not modelled: a capture is a list, so there is no dependency set to show.
  if (deps) *deps = nullptr;
  if (edges) *edges = nullptr;
  if (num_deps) *num_deps = 0;
  return cudaSuccess;
}

cudaError_t GraphLaunch(cudaGraphExec_t e, cudaStream_t h, bool pt) {
  CUgraphExec_st* exec = AsExec(e);
  if (!exec) return Ret(cudaErrorInvalidValue);
  CUstream_st* s = ResolveStream(h, pt);
  if (!s) return Ret(cudaErrorInvalidResourceHandle);
  GraphOp op{exec->body, {}};
  if (s->capturing.load(std::memory_order_acquire))
    return Ret(Enqueue(s, std::move(op)));  // a child graph: its event ops act when reached
  // Event records in the graph take their generation now, so cudaEventQuery says "not ready"
  // until the replay reaches them, exactly like a record queued by hand.
  for (const OpBox& box : *exec->body) {
    if (auto* r = std::get_if<EventRecordOp>(&box.op))
      op.gens.push_back(NewRecordGeneration(r->ev.get()));
    else if (auto* w = std::get_if<EventWaitOp>(&box.op))
      op.gens.push_back(CurrentRecordGeneration(w->ev.get()));
  }
  std::vector<uint64_t> gens = op.gens;
  cudaError_t err = Enqueue(s, std::move(op));
  if (err != cudaSuccess) {
    size_t i = 0;
    for (const OpBox& box : *exec->body) {
      if (!IsEventOp(box.op)) continue;
      if (auto* r = std::get_if<EventRecordOp>(&box.op)) ReachEvent(r->ev.get(), gens[i]);
      ++i;
    }
  }
  return Ret(err);
}

cudaError_t GraphUpload(cudaGraphExec_t e, cudaStream_t h, bool pt) {
  if (!AsExec(e)) return Ret(cudaErrorInvalidValue);
  return ResolveStream(h, pt) ? cudaSuccess : Ret(cudaErrorInvalidResourceHandle);
}

}  // namespace api
}  // namespace gpusim

using namespace gpusim;

// Per thread: the mode CheckCaptureSafe applies to this thread's own calls.
GPUSIM_API cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  if (!mode) return Ret(cudaErrorInvalidValue);
  // The caller's bytes, read as an integer: an out-of-range value is the caller's error to
  // report, not a load of an invalid enum value here.
  int raw = 0;
  static_assert(sizeof(raw) == sizeof(*mode));
  std::memcpy(&raw, mode, sizeof(raw));
  if (raw != cudaStreamCaptureModeGlobal && raw != cudaStreamCaptureModeThreadLocal &&
      raw != cudaStreamCaptureModeRelaxed)
    return Ret(cudaErrorInvalidValue);
  std::swap(*mode, t_capture_mode);
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaGraphCreate(cudaGraph_t* g, unsigned int flags) {
  if (!g || flags) return Ret(cudaErrorInvalidValue);
  *g = new CUgraph_st;
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  CUgraph_st* graph = AsGraph(g);
  if (!graph) return Ret(cudaErrorInvalidValue);
  DeleteGraph(graph);
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t* nodes, size_t* n) {
  // Only the count: nodes are not modelled as objects.
  CUgraph_st* graph = AsGraph(g);
  if (!graph || !n) return Ret(cudaErrorInvalidValue);
  if (nodes) return Ret(cudaErrorNotSupported);
  *n = graph->ops.size();
  return cudaSuccess;
}

static cudaError_t Instantiate(cudaGraphExec_t* out, cudaGraph_t g) {
  CUgraph_st* graph = AsGraph(g);
  if (!out || !graph) return Ret(cudaErrorInvalidValue);
  auto* exec = new CUgraphExec_st;
  exec->body = std::make_shared<const std::vector<OpBox>>(graph->ops);
  *out = exec;
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t* out, cudaGraph_t g,
                                            unsigned long long) {
  return Instantiate(out, g);
}

GPUSIM_API cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* out, cudaGraph_t g,
                                                     unsigned long long) {
  return Instantiate(out, g);
}

GPUSIM_API cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t* out, cudaGraph_t g,
                                                      cudaGraphInstantiateParams* params) {
  cudaError_t e = Instantiate(out, g);
  if (params) {
    params->result_out =
        e == cudaSuccess ? cudaGraphInstantiateSuccess : cudaGraphInstantiateError;
    params->errNode_out = nullptr;
  }
  return e;
}

GPUSIM_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) {
  CUgraphExec_st* exec = AsExec(e);
  if (!exec) return Ret(cudaErrorInvalidValue);
  exec->magic = 0;
  delete exec;  // launches still queued hold the body
  return cudaSuccess;
}
