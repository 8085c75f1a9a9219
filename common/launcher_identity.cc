#include "common/launcher_identity.h"

#include <fmt/format.h>

#include <cctype>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <utility>

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

// The same, reading only the leading digits: Slurm writes SLURM_NTASKS_PER_NODE as "8(x4)" when
// every node runs 8 tasks, and "8,4(x2)" when they differ (this node's count is then not
// known from it; the first is as good a guess as any for sizing helpers).
std::optional<int> FirstLeadingInt(const Environment& env, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    auto text = env.Get(name);
    if (!text) continue;
    std::string_view digits = *text;
    size_t n = 0;
    while (n < digits.size() && n < 9 && digits[n] >= '0' && digits[n] <= '9') ++n;
    int64_t value = 0;
    if (n > 0 && ParseInt(digits.substr(0, n), &value).ok() && value > 0) return static_cast<int>(value);
  }
  return std::nullopt;
}

// The first of `names` that is set and not empty: (variable, value).
std::optional<std::pair<std::string, std::string>> FirstString(
    const Environment& env, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    auto text = env.Get(name);
    if (text && !text->empty()) return std::make_pair(std::string(name), std::string(*text));
  }
  return std::nullopt;
}

struct Launcher {
  const char* name;
  const char* marker;  // a variable only this launcher sets
  std::initializer_list<const char*> rank;
  std::initializer_list<const char*> local_rank;
  std::initializer_list<const char*> world_size;
  std::initializer_list<const char*> job;  // the first set names the job
  std::initializer_list<const char*> local_world_size;  // ranks on this node
};

// 8-4-4-4-12 hex digits: what torchrun --standalone makes per launch (str(uuid.uuid4())).
bool LooksLikeUuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!std::isxdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

// Why the launcher's `value` of `variable` cannot name a job, or "" when it can. A job's name
// must be stable across its relaunches (its checkpoints are found by it) and distinct between
// jobs (two jobs under one name share incidents, plans and commands).
std::string WhyNotAJobName(std::string_view variable, std::string_view value) {
  if (variable != "TORCHELASTIC_RUN_ID") return "";
  if (value == "none") {
    return "TORCHELASTIC_RUN_ID=none names no job (torchrun sets it for every job under its "
           "static rendezvous, so all jobs would share one name)";
  }
  if (LooksLikeUuid(value)) {
    return fmt::format("TORCHELASTIC_RUN_ID={} is a random id made for this launch (torchrun "
                       "--standalone), so a relaunch could never find the job's checkpoints",
                       value);
  }
  return "";
}

// Checked in order: torchrun under Slurm sets both, and its RANK is the training rank. Slurm's
// job id survives a requeue, so it names the job before torchrun's run id.
const Launcher kLaunchers[] = {
    {"torchrun", "RANK", {"RANK"}, {"LOCAL_RANK"}, {"WORLD_SIZE"},
     {"SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"}, {"LOCAL_WORLD_SIZE"}},
    {"openmpi", "OMPI_COMM_WORLD_RANK", {"OMPI_COMM_WORLD_RANK"}, {"OMPI_COMM_WORLD_LOCAL_RANK"},
     {"OMPI_COMM_WORLD_SIZE"}, {"SLURM_JOB_ID", "OMPI_MCA_orte_ess_jobid"}, {"OMPI_COMM_WORLD_LOCAL_SIZE"}},
    {"slurm", "SLURM_PROCID", {"SLURM_PROCID"}, {"SLURM_LOCALID"}, {"SLURM_NTASKS"},
     {"SLURM_JOB_ID"}, {"SLURM_NTASKS_PER_NODE"}},
    {"pmix", "PMIX_RANK", {"PMIX_RANK"}, {"PMIX_LOCAL_RANK", "MPI_LOCALRANKID"}, {"PMIX_SIZE"},
     {"PMIX_NAMESPACE"}, {"PMIX_LOCAL_SIZE", "MPI_LOCALNRANKS"}},
    {"pmi", "PMI_RANK", {"PMI_RANK"}, {"MPI_LOCALRANKID", "PMI_LOCAL_RANK"}, {"PMI_SIZE"}, {},
     {"MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"}},
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
    id.local_world_size = FirstLeadingInt(env, launcher.local_world_size).value_or(-1);
    if (auto named = FirstString(env, launcher.job)) {
      if (std::string why = WhyNotAJobName(named->first, named->second); why.empty()) {
        id.job = named->second;
      } else {
        id.job_error = why;
      }
    }
    break;
  }
  if (config.rank >= 0) id.rank = static_cast<int>(config.rank);
  if (config.local_rank >= 0) id.local_rank = static_cast<int>(config.local_rank);
  if (config.world_size >= 0) id.world_size = static_cast<int>(config.world_size);
  if (!config.job.empty()) {
    id.job = config.job;
    id.job_error.clear();
  }
  if (!id.job_error.empty()) {
    id.job_error += "; set FT_JOB to a name that stays the same when the job is relaunched and "
                    "differs between jobs (Slurm's SLURM_JOB_ID is taken when set)";
  } else if (id.job.empty()) {
    id.job = "default";
  }
  id.node = !config.node_id.empty() ? config.node_id : host_name;
  if (id.node.empty()) id.node = "unknown";
  return id;
}

}  // namespace ft
