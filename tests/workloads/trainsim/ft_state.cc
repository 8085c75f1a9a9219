#include "ft_state.h"

#define FT_WEAK_IMPORT
#include <ft/ft.h>

namespace trainsim {

namespace {

std::string FtError(int result) {
  std::string s = ft_result_string(result);
  const char* detail = ft_last_error();
  if (detail != nullptr && *detail != '\0') s += std::string(": ") + detail;
  return s;
}

}  // namespace

FtStart FtRegisterAndRestore(const Config& config, const Coord& coord,
                             const std::vector<StateBuffer>& state) {
  FtStart start;
  if (config.ft == FtMode::kOff || !ft_available()) return start;
  int r = ft_set_shard(coord.tp, coord.pp, coord.dp);
  if (r == FT_DISABLED) return start;
  for (const StateBuffer& b : state) {
    r = ft_register(b.name.c_str(), b.ptr, b.bytes);
    if (r == FT_DISABLED) return start;
    if (r != FT_OK) {
      // A bad registration is trainsim's bug: say so, but the training itself is unaffected.
      start.warning = "ft_register(" + b.name + "): " + FtError(r) + "; training continues without checkpoints";
      return start;
    }
  }
  r = ft_register_end();
  if (r == FT_DISABLED) return start;
  if (r != FT_OK) {
    // FT_NO_SPACE: the arena does not fit. No saves, hence nothing of ours to restore either.
    start.warning = "ft_register_end: " + FtError(r);  // ft's words say training goes on
    return start;
  }
  start.active = true;
  if (config.ft != FtMode::kRestore) return start;
  int64_t step = -1;
  r = ft_restore(&step);
  if (r == FT_OK) {
    if (step < 0 || step > config.steps) {
      start.error = "ft_restore returned step " + std::to_string(step) + ", outside 0.." +
                    std::to_string(config.steps) + " (--steps)";
      return start;
    }
    start.step = step;
    start.restored = true;
  } else if (r != FT_NO_CHECKPOINT && r != FT_DISABLED) {
    start.error = "ft_restore: " + FtError(r);
  }
  return start;
}

void FtUpdateBegin(const FtStart& session, void* stream) {
  if (session.active) ft_update_begin(stream);
}

void FtStepDone(const FtStart& session, int64_t steps_done) {
  if (session.active) ft_step_done(steps_done);
}

}  // namespace trainsim
