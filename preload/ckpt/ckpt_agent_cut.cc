// Which step a just-in-time or termination save holds (ckpt_agent_impl.h, SaveCut). A copy
// labelled N holds exactly the state after optimizer N on every byte, or it is torn:
//   - device memory is copied as the device left it. When the app names its stream
//     (ft_update_begin), the step markers (step_markers.h) say which step that is — after a
//     hang past ft_step_done(N) with N's work still queued, it is N-1, and the copy says so;
//   - host memory is copied as the host left it: at the host's last ft_step_done, unless an
//     update window is open. With both kinds registered the two steps must be the same;
//   - without a named stream the host's word is all there is (ft_step_done after the update
//     ended on the device: include/ft/ft.h).
#include <algorithm>
#include <chrono>
#include <thread>

#include "common/log.h"
#include "preload/ckpt/ckpt_agent.h"
#include "preload/ckpt/ckpt_agent_impl.h"

namespace ft::preload::agent {

namespace {

using Clock = std::chrono::steady_clock;
using Position = StepMarkers::Position;

// A device at a step boundary that reached no marker for this long is taken as stopped there
// (a rank whose peer hangs stops at its next collective). Long enough for a loaded host's
// device (gpusim's streams are threads) between two markers of a healthy step.
constexpr auto kQuietFor = std::chrono::milliseconds(200);

}  // namespace

SaveCut Agent::CutForSave(SaveOrigin origin) {
  const uint64_t windows_at_start = update_windows_.load(std::memory_order_acquire);
  const uint64_t steps_at_start = steps_done_.load(std::memory_order_acquire);
  const int64_t host_step = StepLabel();
  // The host wrote its buffers during the copy, or is writing them now.
  auto host_moved = [this, windows_at_start, steps_at_start] {
    return update_open_.load(std::memory_order_acquire) ||
           update_windows_.load(std::memory_order_acquire) != windows_at_start ||
           steps_done_.load(std::memory_order_acquire) != steps_at_start;
  };
  SaveCut cut;
  Position at = markers_.Poll();
  if (!has_device_buffers_ || at.state == Position::State::kNone) {
    // The host's word: torn when the optimizer's work may be running now, or when an update
    // window opened or a step completed at any moment of the copy.
    cut.step = host_step;
    cut.torn = [this, host_moved] { return TornNow() || host_moved(); };
    return cut;
  }
  auto whole = [](const Position& p) { return p.state == Position::State::kBoundary && p.step != kNoStep; };
  // Wait for a boundary the device stays at: nothing more queued, or no marker reached lately.
  // A termination save holds the host (the next ft_update_begin waits), so a healthy device
  // drains what its host queued: it is given a quarter of the grace to get there, and the copy
  // is of the newest step. A just-in-time save's device stops at a collective its hung peer
  // never joins: about two steps.
  const double interval_s = step_interval_ns_.load(std::memory_order_relaxed) / 1e9;
  const double grace_s =
      host::Started() ? std::chrono::duration<double>(host::RuntimeConfig().ckpt_term_grace).count() : 10.0;
  const double wait_s = origin == SaveOrigin::kTermination ? std::max(1.0, grace_s / 4)
                                                           : std::clamp(2 * interval_s, 1.0, 10.0);
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait_s));
  auto quiet_since = Clock::now();
  for (;;) {
    const auto now = Clock::now();
    if (whole(at) && (at.pending == 0 || now - quiet_since >= kQuietFor)) break;
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    Position next = markers_.Poll();
    if (next.reached != at.reached) quiet_since = Clock::now();
    at = next;
  }
  if (!whole(at)) {
    const char* where = at.state == Position::State::kInUpdate ? "inside an optimizer update"
                                                               : "at a step the markers cannot place";
    FT_LOG(Warn, Ckpt, "{} save: the device is {} ({} marker(s) still queued); the copy is torn",
           ckpt::SaveOriginName(origin), where, at.pending);
    cut.step = host_step;
    cut.torn = [] { return true; };
    return cut;
  }
  cut.step = at.step;
  if (cut.step != host_step) {
    FT_LOG(Info, Ckpt, "{} save: the device holds step {}, the host completed {}: the copy is of step {}",
           ckpt::SaveOriginName(origin), cut.step, host_step, cut.step);
  }
  // Host buffers hold the host's step: with both kinds, the copy is whole only when the two agree.
  const bool host_differs = has_host_buffers_ && cut.step != host_step;
  const uint64_t reached = at.reached;
  cut.torn = [this, host_moved, host_differs, reached] {
    Position now = markers_.Poll();
    const bool device_moved = now.reached != reached || now.state == Position::State::kUnknown;
    return device_moved || host_differs || (has_host_buffers_ && host_moved());
  };
  return cut;
}

void Agent::WaitStepOnDevice(int64_t step) {
  auto done = [&](const Position& p) {
    if (p.state == Position::State::kNone) return true;  // no stream named: the host's word
    if (p.state == Position::State::kBoundary && p.step == step) return true;
    // Nothing left to reach (the step's marker was skipped): waiting longer changes nothing.
    return p.pending == 0;
  };
  for (int round = 0; !done(markers_.Poll()); ++round) {
    std::this_thread::sleep_for(std::chrono::microseconds(round < 100 ? 100 : 2000));
  }
}

}  // namespace ft::preload::agent
