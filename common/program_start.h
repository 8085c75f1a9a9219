// What ft's programs (ftmaster, ftworker) do first, written once: their settings loaded and
// logging configured, and SIGTERM/SIGINT turned into a flag their loops poll.
#ifndef FT_COMMON_PROGRAM_START_H_
#define FT_COMMON_PROGRAM_START_H_

#include <atomic>
#include <string_view>

#include "common/config.h"
#include "common/environment.h"
#include "common/log.h"
#include "common/status.h"

namespace ft {

// The settings from `env` (Config::Load), logging configured from them, then the table's
// warnings and the FT_* variables that name no setting logged under `subsystem`. A bad log
// setting is printed on stderr as "<program>: ..." and logging keeps its defaults. An error is
// a bad setting: the caller prints it and exits.
Status LoadProgramConfig(std::string_view program, Subsystem subsystem, const Environment& env, Config* config);

// Installs handlers for SIGTERM and SIGINT (at the first call) that set the flag returned, the
// same one at every call.
const std::atomic<bool>& StopOnSignals();

}  // namespace ft

#endif  // FT_COMMON_PROGRAM_START_H_
