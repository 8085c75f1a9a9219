#include "common/launcher_identity.h"

#include <initializer_list>
#include <optional>

#include "common/units.h"

namespace ft {
namespace {

// The first of `names` that is set to an integer >= 0.
std::optional<int> FirstInt(const Environment& env, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    auto text = env.Get(name);
    int64_t value = 0;
    if (text && ParseInt(*text, &value).ok() && value >= 0 && value <= 0x7fffffff) {
      return static_cast<int>(value);
    }
  }
  return std::nullopt;
}

std::optional<std::string> FirstString(const Environment& env, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    auto text = env.Get(name);
    if (text && !text->empty()) return std::string(*text);
  }
  return std::nullopt;
}

struct Launcher {
  const char* name;
  const char* marker;  // a variable only this launcher sets
  std::initializer_list<const char*> rank;
  std::initializer_list<const char*> local_rank;
  std::initializer_list<const char*> world_size;
  std::initializer_list<const char*> job;
};

// Checked in order: torchrun under Slurm sets both, and its RANK is the training rank.
const Launcher kLaunchers[] = {
    {"torchrun", "RANK", {"RANK"}, {"LOCAL_RANK"}, {"WORLD_SIZE"},
     {"TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"}},
    {"openmpi", "OMPI_COMM_WORLD_RANK", {"OMPI_COMM_WORLD_RANK"}, {"OMPI_COMM_WORLD_LOCAL_RANK"},
     {"OMPI_COMM_WORLD_SIZE"}, {"SLURM_JOB_ID", "OMPI_MCA_orte_ess_jobid"}},
    {"slurm", "SLURM_PROCID", {"SLURM_PROCID"}, {"SLURM_LOCALID"}, {"SLURM_NTASKS"},
     {"SLURM_JOB_ID"}},
    {"pmix", "PMIX_RANK", {"PMIX_RANK"}, {"PMIX_LOCAL_RANK", "MPI_LOCALRANKID"}, {"PMIX_SIZE"},
     {"PMIX_NAMESPACE"}},
    {"pmi", "PMI_RANK", {"PMI_RANK"}, {"MPI_LOCALRANKID", "PMI_LOCAL_RANK"}, {"PMI_SIZE"}, {}},
};

}  // namespace

LauncherIdentity ResolveLauncherIdentity(const Config& config, const Environment& env,
                                         const std::string& host_name) {
  LauncherIdentity id;
  id.host = host_name;
  id.launcher = "none";
  for (const Launcher& launcher : kLaunchers) {
    if (!FirstInt(env, {launcher.marker})) continue;
    id.launcher = launcher.name;
    id.rank = FirstInt(env, launcher.rank).value_or(-1);
    id.local_rank = FirstInt(env, launcher.local_rank).value_or(-1);
    id.world_size = FirstInt(env, launcher.world_size).value_or(-1);
    id.job = FirstString(env, launcher.job).value_or("");
    break;
  }
  if (config.rank >= 0) id.rank = static_cast<int>(config.rank);
  if (config.local_rank >= 0) id.local_rank = static_cast<int>(config.local_rank);
  if (config.world_size >= 0) id.world_size = static_cast<int>(config.world_size);
  if (!config.job.empty()) id.job = config.job;
  if (id.job.empty()) id.job = "default";
  id.node = !config.node_id.empty() ? config.node_id : host_name;
  if (id.node.empty()) id.node = "unknown";
  return id;
}

}  // namespace ft
