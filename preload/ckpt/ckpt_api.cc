// The exported C ABI of include/ft/ft.h. Fail-open: every entry is noexcept and catches
// everything; with libft.so inactive (FT_ENABLE=0, no segment, a forked child, after exit
// began) each returns FT_DISABLED and does nothing. The work is the agent's (ckpt_agent.h).
#include <exception>
#include <string>

#include "include/ft/ft.h"
#include "preload/ckpt/agent_host.h"
#include "preload/ckpt/ckpt_agent.h"

namespace ft::preload::agent {

namespace {
thread_local std::string t_last_error;
// What ft_last_error() says when even the message could not be built (no memory): a literal,
// so reporting the failure can never fail.
thread_local const char* t_static_error = nullptr;
}  // namespace

void SetLastError(std::string message) { t_last_error = std::move(message); }

namespace {

// Inside a catch of a noexcept entry point: building the message allocates and may throw
// again, which would leave the noexcept function and std::terminate() the app. Never throws.
void NoteInternalError(const char* what, const char* detail) noexcept {
  try {
    std::string message = std::string(what) + ": internal error";
    if (detail != nullptr) message.append(": ").append(detail);
    t_last_error = std::move(message);
  } catch (...) {
    t_last_error.clear();  // noexcept
    t_static_error = "ft: internal error (out of memory while describing it)";
  }
}

// Runs `body` as libft.so code (our CUDA calls are not intercepted) once libft.so is active.
template <class Body>
int Guarded(const char* what, Body body) noexcept {
  try {
    t_last_error.clear();
    t_static_error = nullptr;
    if (!host::Active()) {
      t_last_error = std::string(what) +
                     ": libft.so is not active (FT_ENABLE=0, no segment, or a forked child); "
                     "nothing is saved or restored";
      return FT_DISABLED;
    }
    if (host::InFt()) return FT_DISABLED;  // called back from inside libft.so: never expected
    host::FtScope in_ft;
    return body();
  } catch (const std::exception& e) {
    NoteInternalError(what, e.what());
  } catch (...) {
    NoteInternalError(what, nullptr);
  }
  return FT_INTERNAL;
}

}  // namespace

}  // namespace ft::preload::agent

using ft::preload::agent::Guarded;

#define FT_API extern "C" __attribute__((visibility("default")))

FT_API int ft_version(void) { return FT_ABI_VERSION; }

FT_API const char* ft_result_string(int result) {
  switch (result) {
    case FT_OK: return "FT_OK: done";
    case FT_DISABLED: return "FT_DISABLED: libft.so is not active; nothing is saved or restored";
    case FT_INVALID_ARGUMENT: return "FT_INVALID_ARGUMENT: a bad argument or a call out of order";
    case FT_NO_SPACE: return "FT_NO_SPACE: the host arena does not fit; training runs on without saves";
    case FT_NO_CHECKPOINT: return "FT_NO_CHECKPOINT: no checkpoint to restore; start from scratch";
    case FT_LAYOUT_MISMATCH: return "FT_LAYOUT_MISMATCH: the saved buffers differ from the registered ones; nothing restored";
    case FT_CORRUPT: return "FT_CORRUPT: no copy of the planned step verified; nothing restored";
    case FT_CUDA_ERROR: return "FT_CUDA_ERROR: a CUDA call failed";
    case FT_TIMEOUT: return "FT_TIMEOUT: no restore plan from ftworker in time";
    case FT_INTERNAL: return "FT_INTERNAL: a bug in ft; please report ft_last_error()";
    default: return "unknown ft_result";
  }
}

FT_API const char* ft_last_error(void) {
  try {
    if (ft::preload::agent::t_static_error != nullptr) return ft::preload::agent::t_static_error;
    return ft::preload::agent::t_last_error.c_str();
  } catch (...) {
    return "";
  }
}

FT_API int ft_set_shard(int tp, int pp, int dp) {
  return Guarded("ft_set_shard", [&] { return ft::preload::agent::ApiSetShard(tp, pp, dp); });
}

FT_API int ft_register(const char* name, const void* ptr, size_t bytes) {
  return Guarded("ft_register", [&] { return ft::preload::agent::ApiRegister(name, ptr, bytes); });
}

FT_API int ft_register_end(void) {
  return Guarded("ft_register_end", [&] { return ft::preload::agent::ApiRegisterEnd(); });
}

FT_API int ft_update_begin(void* stream) {
  return Guarded("ft_update_begin", [&] { return ft::preload::agent::ApiUpdateBegin(stream); });
}

FT_API int ft_step_done(int64_t step) {
  return Guarded("ft_step_done", [&] {
    // The worker's step boundary (kStepDone), stamped before any save work this call does.
    ft::preload::host::RecordStepDone(step);
    return ft::preload::agent::ApiStepDone(step);
  });
}

FT_API int ft_set_total_steps(int64_t total_steps) {
  return Guarded("ft_set_total_steps", [&] {
    if (total_steps < 1) {
      ft::preload::agent::SetLastError("ft_set_total_steps: total_steps must be at least 1, got " +
                                       std::to_string(total_steps) + "; the job's horizon stays as it was");
      return FT_INVALID_ARGUMENT;
    }
    // For the worker, which carries it into the rank's summaries (shm/layout.h total_steps).
    if (!ft::preload::host::Started() || !ft::preload::host::Segment()) return FT_DISABLED;
    ft::preload::host::Segment()->header()->total_steps.store(total_steps, std::memory_order_relaxed);
    return FT_OK;
  });
}

FT_API int ft_restore(int64_t* step) {
  return Guarded("ft_restore", [&] { return ft::preload::agent::ApiRestore(step); });
}

FT_API int ft_save_on_failure(void) {
  return Guarded("ft_save_on_failure", [&] { return ft::preload::agent::ApiSaveOnFailure(); });
}
