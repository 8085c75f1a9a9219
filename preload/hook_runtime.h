// libft.so internal: the hook runtime as the checkpoint agent (preload/ckpt/) sees it. The agent
// includes nothing else of preload/ (cmake/layers.txt holds it to that); the runtime sees the
// agent through preload/ckpt/ckpt_agent.h alone (the poller hands it save commands, the
// termination signal asks it for a save).
//
// What the agent uses, by header:
//   runtime_state.h  g_rt (config, identity, segment, owner_pid: read only), kMaxDevices, NowNs
//   timing.h         AppCuda: the app's CUDA runtime as ft calls it (error check, device)
//   real.h           FT_REAL_CUDA: the real CUDA functions behind the wrappers (copies, events)
//   runtime.h        t_in_ft, ReentryGuard: ft's own CUDA calls are not intercepted again
//   poller_rules.h   RelaxCaptureMode, MayRecordInto: CUDA's stream-capture rules
//   term_signal.h    term::ParseSignals, Arm, BlockTerminationSignals, FinishAtExit, NoteStepDone
// A narrower surface (g_rt's four fields behind accessors) is a change of the agent's code;
// this header is where it would land.
#ifndef FT_PRELOAD_HOOK_RUNTIME_H_
#define FT_PRELOAD_HOOK_RUNTIME_H_

#include "preload/poller_rules.h"
#include "preload/real.h"
#include "preload/runtime.h"
#include "preload/runtime_state.h"
#include "preload/term_signal.h"
#include "preload/timing.h"

#endif  // FT_PRELOAD_HOOK_RUNTIME_H_
