// Who this process is in its job, from the launcher's environment: torchrun, Open MPI,
// Slurm, PMIx, PMI — and FT_* settings, which override any of them. The job's name: FT_JOB,
// else Slurm's job id (it survives a requeue), else the launcher's own id — refused when it is
// not one job's stable name (torchrun's TORCHELASTIC_RUN_ID "none" under a static rendezvous, a
// random UUID per launch under --standalone). Pure: the environment
// and configuration come in, so every launcher is tested without launching anything.
#ifndef FT_COMMON_LAUNCHER_IDENTITY_H_
#define FT_COMMON_LAUNCHER_IDENTITY_H_

#include <string>

#include "common/config.h"
#include "common/environment.h"

namespace ft {

struct LauncherIdentity {
  // "default" when nothing names the job (a program run by hand); empty exactly when
  // job_error says why the launcher's id cannot name it (torchrun's "none", a per-launch
  // random id) and FT_JOB is not set: the caller must not guess a name then.
  std::string job;
  std::string job_error;   // "": `job` is usable; otherwise why not, ending with what to do
  std::string node;        // never empty: the host name when nothing names the node
  std::string host;
  int rank = -1;           // -1: unknown
  int local_rank = -1;
  int world_size = -1;
  int local_world_size = -1;  // ranks on this node (sizes the checkpoint helpers); -1: unknown
  std::string launcher;    // "torchrun", "openmpi", "slurm", "pmix", "pmi", or "none"
};

// `host_name` is passed in (the caller reads it once).
LauncherIdentity ResolveLauncherIdentity(const Config& config, const Environment& env,
                                         const std::string& host_name);

}  // namespace ft

#endif  // FT_COMMON_LAUNCHER_IDENTITY_H_
