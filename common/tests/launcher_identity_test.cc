#include "common/launcher_identity.h"

#include <gtest/gtest.h>

namespace ft {
namespace {

LauncherIdentity Resolve(std::map<std::string, std::string, std::less<>> vars) {
  Environment env(std::move(vars));
  Config config;
  std::vector<std::string> warnings;
  EXPECT_TRUE(Config::Load(env, &config, &warnings).ok());
  return ResolveLauncherIdentity(config, env, "gpu-host-17");
}

TEST(LauncherIdentityTest, Torchrun) {
  auto id = Resolve({{"RANK", "9"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "16"},
                     {"TORCHELASTIC_RUN_ID", "llama"}});
  EXPECT_EQ(id.launcher, "torchrun");
  EXPECT_EQ(id.rank, 9);
  EXPECT_EQ(id.local_rank, 1);
  EXPECT_EQ(id.world_size, 16);
  EXPECT_EQ(id.job, "llama");
  EXPECT_EQ(id.node, "gpu-host-17");
  EXPECT_EQ(id.host, "gpu-host-17");
}

TEST(LauncherIdentityTest, OpenMpi) {
  auto id = Resolve({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                     {"OMPI_COMM_WORLD_SIZE", "4"}});
  EXPECT_EQ(id.launcher, "openmpi");
  EXPECT_EQ(id.rank, 3);
  EXPECT_EQ(id.world_size, 4);
  EXPECT_EQ(id.job, "default");
}

TEST(LauncherIdentityTest, SlurmAndTorchrunUnderSlurmPrefersTorchrun) {
  auto slurm = Resolve({{"SLURM_PROCID", "5"}, {"SLURM_LOCALID", "1"}, {"SLURM_NTASKS", "8"},
                        {"SLURM_JOB_ID", "4242"}});
  EXPECT_EQ(slurm.launcher, "slurm");
  EXPECT_EQ(slurm.rank, 5);
  EXPECT_EQ(slurm.job, "4242");
  auto both = Resolve({{"SLURM_PROCID", "0"}, {"SLURM_JOB_ID", "4242"}, {"RANK", "6"},
                       {"WORLD_SIZE", "8"}});
  EXPECT_EQ(both.launcher, "torchrun");
  EXPECT_EQ(both.rank, 6);
  EXPECT_EQ(both.job, "4242");
}

TEST(LauncherIdentityTest, PmixAndPmi) {
  auto pmix = Resolve({{"PMIX_RANK", "2"}, {"PMIX_NAMESPACE", "ns-1"}});
  EXPECT_EQ(pmix.launcher, "pmix");
  EXPECT_EQ(pmix.rank, 2);
  EXPECT_EQ(pmix.job, "ns-1");
  auto pmi = Resolve({{"PMI_RANK", "7"}, {"PMI_SIZE", "8"}});
  EXPECT_EQ(pmi.launcher, "pmi");
  EXPECT_EQ(pmi.world_size, 8);
}

// How many ranks share the node (the checkpoint helpers take a share of its cores), in each
// launcher's words; Slurm's "8(x4)" is 8 per node; unknown or garbage is -1.
TEST(LauncherIdentityTest, LocalWorldSizeFromEachLauncher) {
  EXPECT_EQ(Resolve({{"RANK", "9"}, {"LOCAL_WORLD_SIZE", "8"}}).local_world_size, 8);
  EXPECT_EQ(Resolve({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}).local_world_size, 4);
  EXPECT_EQ(Resolve({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS_PER_NODE", "8(x4)"}}).local_world_size, 8);
  EXPECT_EQ(Resolve({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS_PER_NODE", "2,4(x3)"}}).local_world_size, 2);
  EXPECT_EQ(Resolve({{"PMIX_RANK", "0"}, {"PMIX_LOCAL_SIZE", "6"}}).local_world_size, 6);
  EXPECT_EQ(Resolve({{"PMI_RANK", "0"}, {"MPI_LOCALNRANKS", "2"}}).local_world_size, 2);
  EXPECT_EQ(Resolve({{"RANK", "9"}}).local_world_size, -1);
  EXPECT_EQ(Resolve({{"RANK", "9"}, {"LOCAL_WORLD_SIZE", "eight"}}).local_world_size, -1);
  EXPECT_EQ(Resolve({{"RANK", "9"}, {"LOCAL_WORLD_SIZE", "0"}}).local_world_size, -1);
  EXPECT_EQ(Resolve({{"LOCAL_WORLD_SIZE", "8"}}).local_world_size, -1);  // no launcher named the rank
}

TEST(LauncherIdentityTest, FtSettingsOverrideTheLauncher) {
  auto id = Resolve({{"RANK", "9"}, {"WORLD_SIZE", "16"}, {"FT_RANK", "1"}, {"FT_JOB", "mine"},
                     {"FT_NODE_ID", "node3"}, {"FT_WORLD_SIZE", "2"}});
  EXPECT_EQ(id.rank, 1);
  EXPECT_EQ(id.world_size, 2);
  EXPECT_EQ(id.job, "mine");
  EXPECT_EQ(id.node, "node3");
}

TEST(LauncherIdentityTest, GarbageValuesAreIgnoredNotTrusted) {
  auto id = Resolve({{"RANK", "abc"}, {"OMPI_COMM_WORLD_RANK", "-4"}, {"SLURM_PROCID", "2"},
                     {"SLURM_NTASKS", "99999999999"}});
  EXPECT_EQ(id.launcher, "slurm");
  EXPECT_EQ(id.rank, 2);
  EXPECT_EQ(id.world_size, -1);
  auto none = Resolve({});
  EXPECT_EQ(none.launcher, "none");
  EXPECT_EQ(none.rank, -1);
  EXPECT_EQ(none.job, "default");
}

TEST(LauncherIdentityTest, TorchrunsStaticRunIdNoneIsRefusedNamingFtJob) {
  auto id = Resolve({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_RUN_ID", "none"}});
  EXPECT_EQ(id.launcher, "torchrun");
  EXPECT_EQ(id.job, "") << "every static torchrun job would share the name 'none'";
  EXPECT_NE(id.job_error.find("FT_JOB"), std::string::npos) << id.job_error;
  EXPECT_NE(id.job_error.find("TORCHELASTIC_RUN_ID=none"), std::string::npos) << id.job_error;
}

TEST(LauncherIdentityTest, AStandaloneRandomRunIdIsRefusedNamingFtJob) {
  auto id = Resolve({{"RANK", "1"}, {"WORLD_SIZE", "2"},
                     {"TORCHELASTIC_RUN_ID", "3f2b8c1e-9a4d-4e6f-8b7a-0c1d2e3f4a5b"}});
  EXPECT_EQ(id.job, "") << "a relaunch gets another uuid and would never restore";
  EXPECT_NE(id.job_error.find("FT_JOB"), std::string::npos) << id.job_error;
  // A run id the user chose (--rdzv_id) is stable: taken.
  auto chosen = Resolve({{"RANK", "1"}, {"TORCHELASTIC_RUN_ID", "llama-70b-run2"}});
  EXPECT_EQ(chosen.job, "llama-70b-run2");
  EXPECT_EQ(chosen.job_error, "");
}

TEST(LauncherIdentityTest, SlurmsJobIdWinsOverTorchrunsRunId) {
  // Slurm's job id survives a requeue; torchrun's run id may be "none" or per launch.
  auto none = Resolve({{"RANK", "2"}, {"SLURM_JOB_ID", "4242"}, {"TORCHELASTIC_RUN_ID", "none"}});
  EXPECT_EQ(none.job, "4242");
  EXPECT_EQ(none.job_error, "");
  auto named = Resolve({{"RANK", "2"}, {"SLURM_JOB_ID", "4242"}, {"TORCHELASTIC_RUN_ID", "llama"}});
  EXPECT_EQ(named.job, "4242");
}

TEST(LauncherIdentityTest, FtJobOverridesEverythingAndClearsTheRefusal) {
  for (const char* run_id : {"none", "3f2b8c1e-9a4d-4e6f-8b7a-0c1d2e3f4a5b", "llama"}) {
    auto id = Resolve({{"RANK", "0"}, {"SLURM_JOB_ID", "4242"}, {"TORCHELASTIC_RUN_ID", run_id},
                       {"FT_JOB", "mine"}});
    EXPECT_EQ(id.job, "mine") << run_id;
    EXPECT_EQ(id.job_error, "") << run_id;
  }
}

TEST(LauncherIdentityTest, NothingNamingTheJobStillMeansDefault) {
  // A program run by hand, with no launcher: one job on the machine, as documented.
  auto id = Resolve({});
  EXPECT_EQ(id.job, "default");
  EXPECT_EQ(id.job_error, "");
  auto torchrun_without_id = Resolve({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_EQ(torchrun_without_id.job, "default");
}

}  // namespace
}  // namespace ft
