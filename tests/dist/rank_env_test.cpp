// rank_env_test.cpp: rank discovery (lab/dist/rank_env.hpp) against environment fixtures, one per
// launcher, in the documented order: command line > RANK/WORLD_SIZE (dtlab launch, torchrun, plain env)
// > Open MPI > PMI > SLURM > a single process. Also the errors, which must name the variable and value.
#include <gtest/gtest.h>

#include <string>

#include "lab/dist/rank_env.hpp"

namespace dtlab {
namespace {

// The message of the RankEnvError that discover_rank_env throws, or a test failure when it does not.
std::string discovery_error(const RankArgs& args, const EnvMap& env) {
  try {
    const RankEnv r = discover_rank_env(args, env);
    ADD_FAILURE() << "expected RankEnvError, got launcher=" << r.launcher << " rank=" << r.rank
                  << " world_size=" << r.world_size;
  } catch (const RankEnvError& e) {
    return e.what();
  }
  return "";
}

// What dtlab launch sets for rank 1 of 4.
EnvMap dtlab_launch_env() {
  return {{"RANK", "1"},
          {"WORLD_SIZE", "4"},
          {"LOCAL_RANK", "1"},
          {"LOCAL_WORLD_SIZE", "4"},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", "29611"},
          {"DTLAB_LAUNCHER", "dtlab"}};
}

TEST(RankEnv, NoLauncherIsASingleProcess) {
  const RankEnv r = discover_rank_env({}, {{"HOME", "/root"}, {"PATH", "/usr/bin"}});
  EXPECT_EQ(r.launcher, "none");
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.world_size, 1);
  EXPECT_EQ(r.local_rank, 0);
  EXPECT_EQ(r.local_world_size, 1);
  EXPECT_EQ(r.master_addr, "127.0.0.1");
  EXPECT_EQ(r.master_port, 29500);
  EXPECT_FALSE(r.agent_store);
}

TEST(RankEnv, EmptyValuesCountAsUnset) {
  // `RANK= WORLD_SIZE= prog` must not be read as rank 0 of an unknown world.
  const RankEnv r = discover_rank_env({}, {{"RANK", ""}, {"WORLD_SIZE", ""}});
  EXPECT_EQ(r.launcher, "none");
}

TEST(RankEnv, DtlabLaunch) {
  const RankEnv r = discover_rank_env({}, dtlab_launch_env());
  EXPECT_EQ(r.launcher, "dtlab");
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.world_size, 4);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.local_world_size, 4);
  EXPECT_EQ(r.master_addr, "127.0.0.1");
  EXPECT_EQ(r.master_port, 29611);
  EXPECT_FALSE(r.agent_store);
  EXPECT_EQ(r.store_prefix, "");
  EXPECT_EQ(r.host_ranks, 4);  // no DTLAB_HOST_RANKS: the local world
}

// dtlab launch --nodes 2 -n 1: each rank is alone on its (emulated) node, but both share this machine's cores.
TEST(RankEnv, EmulatedClusterRanksShareTheHost) {
  EnvMap env = dtlab_launch_env();
  env["LOCAL_RANK"] = "0";
  env["LOCAL_WORLD_SIZE"] = "1";
  env["DTLAB_HOST_RANKS"] = "4";
  const RankEnv r = discover_rank_env({}, env);
  EXPECT_EQ(r.local_world_size, 1);
  EXPECT_EQ(r.host_ranks, 4);
}

TEST(RankEnv, HostRanksOnlyFromDtlabLaunch) {
  EnvMap env = dtlab_launch_env();
  env["LOCAL_WORLD_SIZE"] = "2";
  env["DTLAB_HOST_RANKS"] = "4";
  env.erase("DTLAB_LAUNCHER");
  EXPECT_EQ(discover_rank_env({}, env).host_ranks, 2);  // a plain env (or torchrun): the local world
}

TEST(RankEnv, HostRanksOutsideLocalAndWorldSizeIsAnError) {
  EnvMap env = dtlab_launch_env();
  env["DTLAB_HOST_RANKS"] = "8";
  const std::string above = discovery_error({}, env);
  EXPECT_NE(above.find("DTLAB_HOST_RANKS=8 must lie between the local world size 4 and the world size 4"),
            std::string::npos)
      << above;
  env["DTLAB_HOST_RANKS"] = "2";
  EXPECT_NE(discovery_error({}, env).find("DTLAB_HOST_RANKS=2"), std::string::npos);
}

TEST(RankEnv, PlainRankVariablesWithoutALauncherMarkAreEnv) {
  EnvMap env = dtlab_launch_env();
  env.erase("DTLAB_LAUNCHER");
  EXPECT_EQ(discover_rank_env({}, env).launcher, "env");
}

TEST(RankEnv, LocalRankDefaultsToRankAndLocalWorldToWorld) {
  const RankEnv r = discover_rank_env(
      {}, {{"RANK", "2"}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29000"}});
  EXPECT_EQ(r.local_rank, 2);
  EXPECT_EQ(r.local_world_size, 3);
}

TEST(RankEnv, TorchrunWithoutAgentStore) {
  EnvMap env = dtlab_launch_env();
  env.erase("DTLAB_LAUNCHER");
  env["TORCHELASTIC_RUN_ID"] = "job-42";
  const RankEnv r = discover_rank_env({}, env);
  EXPECT_EQ(r.launcher, "torchrun");
  EXPECT_FALSE(r.agent_store);
  EXPECT_EQ(r.store_prefix, "");
}

TEST(RankEnv, TorchrunAgentStoreUsesTheRestartCountPrefix) {
  EnvMap env = dtlab_launch_env();
  env.erase("DTLAB_LAUNCHER");
  env["TORCHELASTIC_RUN_ID"] = "job-42";
  env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  env["TORCHELASTIC_RESTART_COUNT"] = "3";
  const RankEnv r = discover_rank_env({}, env);
  EXPECT_EQ(r.launcher, "torchrun");
  EXPECT_TRUE(r.agent_store);
  EXPECT_EQ(r.store_prefix, "/worker/attempt_3");
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.master_port, 29611);
}

TEST(RankEnv, TorchrunAgentStoreWithoutRestartCountIsAttemptZero) {
  EnvMap env = dtlab_launch_env();
  env.erase("DTLAB_LAUNCHER");
  env["TORCHELASTIC_RUN_ID"] = "job-42";
  env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  const RankEnv r = discover_rank_env({}, env);
  EXPECT_TRUE(r.agent_store);
  EXPECT_EQ(r.store_prefix, "/worker/attempt_0");
}

TEST(RankEnv, AgentStoreFalseMeansOwnStore) {
  EnvMap env = dtlab_launch_env();
  env["TORCHELASTIC_RUN_ID"] = "job-42";
  env["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  EXPECT_FALSE(discover_rank_env({}, env).agent_store);
}

TEST(RankEnv, DtlabMarkWinsOverTorchelasticRunId) {
  EnvMap env = dtlab_launch_env();
  env["TORCHELASTIC_RUN_ID"] = "job-42";
  EXPECT_EQ(discover_rank_env({}, env).launcher, "dtlab");
}

TEST(RankEnv, CommandLineWinsOverEnvironment) {
  RankArgs args;
  args.rank = 0;
  args.world_size = 2;
  args.master_port = 29777;
  const RankEnv r = discover_rank_env(args, dtlab_launch_env());
  EXPECT_EQ(r.launcher, "cli");
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.world_size, 2);
  EXPECT_EQ(r.local_rank, 0);
  EXPECT_EQ(r.local_world_size, 2);
  EXPECT_EQ(r.master_port, 29777);        // the flag beats MASTER_PORT
  EXPECT_EQ(r.master_addr, "127.0.0.1");  // MASTER_ADDR from the environment fills what the flags leave open
}

TEST(RankEnv, CommandLineTakesMasterFromEnvironmentWhenNotGiven) {
  RankArgs args;
  args.rank = 1;
  args.world_size = 2;
  args.local_rank = 0;
  const RankEnv r = discover_rank_env(args, {{"MASTER_ADDR", "127.0.0.5"}, {"MASTER_PORT", "29123"}});
  EXPECT_EQ(r.launcher, "cli");
  EXPECT_EQ(r.local_rank, 0);
  EXPECT_EQ(r.master_addr, "127.0.0.5");
  EXPECT_EQ(r.master_port, 29123);
  args.master_addr = "127.0.0.9";
  EXPECT_EQ(discover_rank_env(args, {{"MASTER_ADDR", "127.0.0.5"}}).master_addr, "127.0.0.9");
}

TEST(RankEnv, CommandLineRankWithoutWorldSizeIsAnError) {
  RankArgs args;
  args.rank = 0;
  const std::string message = discovery_error(args, {});
  EXPECT_NE(message.find("--world-size"), std::string::npos) << message;
}

TEST(RankEnv, CommandLineRankOutOfRangeIsAnError) {
  RankArgs args;
  args.rank = 2;
  args.world_size = 2;
  const std::string message = discovery_error(args, {});
  EXPECT_NE(message.find("--rank=2"), std::string::npos) << message;
  EXPECT_NE(message.find("--world-size=2"), std::string::npos) << message;
}

TEST(RankEnv, CommandLineNegativeRankIsAnError) {
  RankArgs args;
  args.rank = -1;
  args.world_size = 2;
  const std::string message = discovery_error(args, {});
  EXPECT_NE(message.find("--rank=-1"), std::string::npos) << message;
}

TEST(RankEnv, OpenMpi) {
  const RankEnv r = discover_rank_env({}, {{"OMPI_COMM_WORLD_RANK", "3"},
                                           {"OMPI_COMM_WORLD_SIZE", "8"},
                                           {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                           {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(r.launcher, "openmpi");
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.world_size, 8);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.local_world_size, 2);
  EXPECT_EQ(r.master_addr, "127.0.0.1");  // defaults when MASTER_* are not set
  EXPECT_EQ(r.master_port, 29500);
}

TEST(RankEnv, OpenMpiTakesMasterFromEnvironment) {
  const RankEnv r = discover_rank_env({}, {{"OMPI_COMM_WORLD_RANK", "0"},
                                           {"OMPI_COMM_WORLD_SIZE", "2"},
                                           {"MASTER_ADDR", "10.1.2.3"},
                                           {"MASTER_PORT", "29400"}});
  EXPECT_EQ(r.master_addr, "10.1.2.3");
  EXPECT_EQ(r.master_port, 29400);
}

TEST(RankEnv, RankVariablesWinOverOpenMpi) {
  EnvMap env = dtlab_launch_env();
  env["OMPI_COMM_WORLD_RANK"] = "0";
  env["OMPI_COMM_WORLD_SIZE"] = "2";
  const RankEnv r = discover_rank_env({}, env);
  EXPECT_EQ(r.launcher, "dtlab");
  EXPECT_EQ(r.world_size, 4);
}

TEST(RankEnv, Pmi) {
  const RankEnv r =
      discover_rank_env({}, {{"PMI_RANK", "5"}, {"PMI_SIZE", "6"}, {"MPI_LOCALRANKID", "2"}, {"MPI_LOCALNRANKS", "3"}});
  EXPECT_EQ(r.launcher, "pmi");
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.world_size, 6);
  EXPECT_EQ(r.local_rank, 2);
  EXPECT_EQ(r.local_world_size, 3);
}

TEST(RankEnv, OpenMpiWinsOverPmi) {
  const RankEnv r = discover_rank_env(
      {}, {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"PMI_RANK", "5"}, {"PMI_SIZE", "6"}});
  EXPECT_EQ(r.launcher, "openmpi");
  EXPECT_EQ(r.rank, 1);
}

TEST(RankEnv, Slurm) {
  const RankEnv r = discover_rank_env({}, {{"SLURM_PROCID", "7"},
                                           {"SLURM_NTASKS", "8"},
                                           {"SLURM_LOCALID", "3"},
                                           {"SLURM_NTASKS_PER_NODE", "4"},
                                           {"SLURM_JOB_NODELIST", "gpu[07-09,12],cpu01"}});
  EXPECT_EQ(r.launcher, "slurm");
  EXPECT_EQ(r.rank, 7);
  EXPECT_EQ(r.world_size, 8);
  EXPECT_EQ(r.local_rank, 3);
  EXPECT_EQ(r.local_world_size, 4);
  EXPECT_EQ(r.master_addr, "gpu07");
  EXPECT_EQ(r.master_port, 29500);
}

TEST(RankEnv, SlurmMasterAddrFromEnvironmentWinsOverNodeList) {
  const RankEnv r = discover_rank_env({}, {{"SLURM_PROCID", "0"},
                                           {"SLURM_NTASKS", "2"},
                                           {"SLURM_JOB_NODELIST", "a,b"},
                                           {"MASTER_ADDR", "head"},
                                           {"MASTER_PORT", "29333"}});
  EXPECT_EQ(r.master_addr, "head");
  EXPECT_EQ(r.master_port, 29333);
}

TEST(RankEnv, PmiWinsOverSlurm) {
  const RankEnv r =
      discover_rank_env({}, {{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}});
  EXPECT_EQ(r.launcher, "pmi");
  EXPECT_EQ(r.world_size, 2);
}

TEST(RankEnv, FirstSlurmHost) {
  EXPECT_EQ(first_slurm_host("gpu[07-09,12],cpu01"), "gpu07");
  EXPECT_EQ(first_slurm_host("a,b"), "a");
  EXPECT_EQ(first_slurm_host("node1"), "node1");
  EXPECT_EQ(first_slurm_host("node[3-5]"), "node3");
  EXPECT_EQ(first_slurm_host("node[12,4]"), "node12");
  EXPECT_EQ(first_slurm_host("cpu01,gpu[07-09]"), "cpu01");
}

TEST(RankEnv, RankNotBelowWorldSizeNamesBothVariables) {
  EnvMap env = dtlab_launch_env();
  env["RANK"] = "4";
  const std::string message = discovery_error({}, env);
  EXPECT_NE(message.find("RANK=4"), std::string::npos) << message;
  EXPECT_NE(message.find("WORLD_SIZE=4"), std::string::npos) << message;
}

TEST(RankEnv, SlurmRankNotBelowTasksNamesTheSlurmVariables) {
  const std::string message = discovery_error({}, {{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "2"}});
  EXPECT_NE(message.find("SLURM_PROCID=2"), std::string::npos) << message;
  EXPECT_NE(message.find("SLURM_NTASKS=2"), std::string::npos) << message;
}

TEST(RankEnv, NonIntegerValueNamesVariableAndValue) {
  EnvMap env = dtlab_launch_env();
  env["WORLD_SIZE"] = "four";
  std::string message = discovery_error({}, env);
  EXPECT_NE(message.find("WORLD_SIZE"), std::string::npos) << message;
  EXPECT_NE(message.find("four"), std::string::npos) << message;
  EXPECT_NE(message.find("not an integer"), std::string::npos) << message;

  env = dtlab_launch_env();
  env["RANK"] = "1x";
  message = discovery_error({}, env);
  EXPECT_NE(message.find("RANK='1x'"), std::string::npos) << message;

  message = discovery_error({}, {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2.5"}});
  EXPECT_NE(message.find("OMPI_COMM_WORLD_SIZE"), std::string::npos) << message;
}

TEST(RankEnv, NegativeRankVariableIsAnError) {
  EnvMap env = dtlab_launch_env();
  env["RANK"] = "-1";
  const std::string message = discovery_error({}, env);
  EXPECT_NE(message.find("RANK=-1"), std::string::npos) << message;
}

TEST(RankEnv, ZeroWorldSizeIsAnError) {
  EnvMap env = dtlab_launch_env();
  env["WORLD_SIZE"] = "0";
  env["RANK"] = "0";
  const std::string message = discovery_error({}, env);
  EXPECT_NE(message.find("WORLD_SIZE=0"), std::string::npos) << message;
}

TEST(RankEnv, MissingMasterPortWithRankIsAnError) {
  EnvMap env = dtlab_launch_env();
  env.erase("MASTER_PORT");
  const std::string message = discovery_error({}, env);
  EXPECT_NE(message.find("MASTER_PORT"), std::string::npos) << message;
}

TEST(RankEnv, MissingMasterAddrWithRankIsAnError) {
  EnvMap env = dtlab_launch_env();
  env.erase("MASTER_ADDR");
  const std::string message = discovery_error({}, env);
  EXPECT_NE(message.find("MASTER_ADDR"), std::string::npos) << message;
}

TEST(RankEnv, MasterPortOutOfRangeIsAnError) {
  EnvMap env = dtlab_launch_env();
  env["MASTER_PORT"] = "70000";
  const std::string message = discovery_error({}, env);
  EXPECT_NE(message.find("MASTER_PORT=70000"), std::string::npos) << message;
}

TEST(RankEnv, CurrentEnvironmentSeesSetenv) {
  ::setenv("DTLAB_RANK_ENV_TEST_PROBE", "a=b", 1);  // a value with '=' keeps everything after the first
  const EnvMap env = current_environment();
  ::unsetenv("DTLAB_RANK_ENV_TEST_PROBE");
  ASSERT_TRUE(env.count("DTLAB_RANK_ENV_TEST_PROBE"));
  EXPECT_EQ(env.at("DTLAB_RANK_ENV_TEST_PROBE"), "a=b");
}

}  // namespace
}  // namespace dtlab
