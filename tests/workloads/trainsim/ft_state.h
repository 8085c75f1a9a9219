// trainsim's use of ft's checkpoint API (include/ft/ft.h): register the state, restore it at
// start, report each completed step. Plain C++ against weak imports: without libft.so every
// function here does nothing, so trainsim runs exactly as it did before ft existed.
#ifndef TRAINSIM_FT_STATE_H_
#define TRAINSIM_FT_STATE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "config.h"

namespace trainsim {

struct StateBuffer {
  std::string name;  // the same on every data-parallel replica of a shard
  const void* ptr;
  size_t bytes;
};

struct FtStart {
  bool active = false;    // libft.so is loaded, enabled, and took the registration
  int64_t step = 0;       // the step to start at: the restored one, else 0
  bool restored = false;
  std::string warning;    // something the user should read, training goes on (e.g. no space)
  std::string error;      // a failed restore: the process must not train from scratch
};

// When libft.so is loaded and config.ft is not off: ft_set_shard, ft_register of every buffer
// in order, ft_register_end, then (config.ft == restore) ft_restore. FT_NO_CHECKPOINT starts
// from scratch; any other restore failure fills `error` with ft's words.
FtStart FtRegisterAndRestore(const Config& config, const Coord& coord,
                             const std::vector<StateBuffer>& state);

// Around the optimizer: before its launches on `stream` (a cudaStream_t), and once the step
// is complete on the device (`steps_done` = the application's step label). No-ops unless the
// session is active; failures are ft's to log (fail-open), never the training's.
void FtUpdateBegin(const FtStart& session, void* stream);
void FtStepDone(const FtStart& session, int64_t steps_done);

}  // namespace trainsim

#endif  // TRAINSIM_FT_STATE_H_
