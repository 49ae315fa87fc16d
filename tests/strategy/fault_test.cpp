// fault_test.cpp: jobs that fail (RELIABILITY C14-C16, D21), over real processes. Each case must end with a non-zero
// exit, a message naming the rank (and the collective, where one was in flight), within its time bound, and with no
// process of the job left behind.
//   rank 0 (the store host) dies; a rank dies in the middle of a ring reduce-scatter (world 4); a rank stalls
//   (SIGSTOP) and the others time out naming it; a rank dies with no launcher supervising (ranks started by hand, and
//   under torchrun), so each survivor's own timeout or error ends it; a NaN gradient at world 2 in fp32.
#include <dirent.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "tests/strategy/job.hpp"

namespace dtlab {
namespace {

const std::string kBin = std::string(DTLAB_BINARY_DIR) + "/bin/";
const std::string kConfig = std::string(DTLAB_SOURCE_DIR) + "/tests/strategy/tiny_ddp.yaml";

// Processes whose command line mentions `marker` (a run directory unique to the test).
std::vector<std::string> processes_mentioning(const std::string& marker) {
  std::vector<std::string> found;
  DIR* proc = opendir("/proc");
  if (!proc) return found;
  while (dirent* e = readdir(proc)) {
    const std::string pid = e->d_name;
    if (pid.find_first_not_of("0123456789") != std::string::npos || pid == std::to_string(getpid())) continue;
    std::ifstream in("/proc/" + pid + "/cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (char& c : cmdline)
      if (c == '\0') c = ' ';
    if (cmdline.find(marker) != std::string::npos) found.push_back(pid + ": " + cmdline);
  }
  closedir(proc);
  return found;
}

// A `dtlab train` of tiny under `dtlab launch -n world`, with a fault in the environment.
testing::JobResult launched_job(const std::string& out, int world, const std::string& fault,
                                std::vector<std::string> overrides = {}, const std::string& timeout_s = "30") {
  std::vector<std::string> args = {
      kBin + "dtlab",    "launch", "-n", std::to_string(world), kBin + "dtlab", "train", "--config", kConfig,
      "train.steps=200", "--out",  out,  "--timeout",           timeout_s};
  args.insert(args.end(), overrides.begin(), overrides.end());
  return testing::run_job(args, 120, {fault});
}

void expect_nothing_left(const std::string& out) {
  usleep(200 * 1000);  // the job's pipes closed; give the kernel a moment to reap
  EXPECT_TRUE(processes_mentioning(out).empty()) << "left behind:\n" << processes_mentioning(out).front();
}

TEST(Faults, StoreHostRankZeroDiesAndTheJobStopsNamingIt) {
  const std::string out = ::testing::TempDir() + "dtlab_fault_rank0";
  const auto job = launched_job(out, 2, "DTLAB_INJECT_FAULT=0:3:sigkill");
  EXPECT_NE(job.exit_code, 0) << job.output;
  EXPECT_LT(job.seconds, 60.0) << job.output;
  EXPECT_NE(job.output.find("rank 0 was killed by signal SIGKILL"), std::string::npos) << job.output;
  expect_nothing_left(out);
}

TEST(Faults, RankDyingInsideARingReduceScatterStopsTheJob) {
  const std::string out = ::testing::TempDir() + "dtlab_fault_mid_ring";
  const auto job = launched_job(out, 4, "DTLAB_INJECT_FAULT=1:2:sigkill@mid_ring",
                                {"parallel.strategy=fsdp_full_shard", "train.micro_batch=2"});
  EXPECT_NE(job.exit_code, 0) << job.output;
  EXPECT_LT(job.seconds, 60.0) << job.output;
  EXPECT_NE(job.output.find("rank 1 at step 2, mid_ring: sigkill"), std::string::npos) << job.output;
  EXPECT_NE(job.output.find("rank 1 was killed by signal SIGKILL"), std::string::npos) << job.output;
  expect_nothing_left(out);
}

// A stalled rank is alive to the launcher; the others' collective timeout must end the job and name it.
TEST(Faults, StalledRankTimesOutTheCollectiveNamingTheRankAndTheCollective) {
  const std::string out = ::testing::TempDir() + "dtlab_fault_stall";
  const auto job = launched_job(out, 2, "DTLAB_INJECT_FAULT=1:3:stop", {}, "8");
  EXPECT_NE(job.exit_code, 0) << job.output;
  EXPECT_LT(job.seconds, 8.0 + 10.0) << "the timeout is 8 s; diagnosis and stopping add a few" << job.output;
  EXPECT_NE(job.output.find("Timed out"), std::string::npos) << job.output;
  EXPECT_NE(job.output.find("all_reduce 'ddp.bucket."), std::string::npos) << job.output;
  // Which step the stalled rank last published depends on its heartbeat (polled every 50 ms, a tiny step takes
  // ~25 ms): the diagnosis must name the rank and where it was, at step 3 at the latest.
  EXPECT_TRUE(std::regex_search(job.output,
                                std::regex("rank 1 stopped reporting \\(dead or stalled\\); it was at step [123],")))
      << job.output;
  expect_nothing_left(out);
}

// No supervisor: two ranks started by hand. Rank 1 dies; rank 0 must end by itself, naming rank 1.
TEST(Faults, WithoutALauncherTheSurvivorEndsByItselfNamingTheDeadRank) {
  const std::string out = ::testing::TempDir() + "dtlab_fault_unsupervised";
  const std::string port = std::to_string(20000 + getpid() % 20000);
  auto rank = [&](int r) {
    return std::vector<std::string>{
        kBin + "dtlab", "train", "--config",      kConfig, "train.steps=200", "--out", out, "--rank", std::to_string(r),
        "--world-size", "2",     "--master-port", port,    "--timeout",       "10"};
  };
  const pid_t dying = fork();
  if (dying == 0) {
    setenv("DTLAB_INJECT_FAULT", "1:3:sigkill", 1);
    const auto args = rank(1);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    freopen("/dev/null", "w", stdout);
    execv(argv[0], argv.data());
    _exit(127);
  }
  const auto survivor = testing::run_job(rank(0), 60);
  int status = 0;
  waitpid(dying, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status)) << "rank 1 should have killed itself";
  EXPECT_NE(survivor.exit_code, 0) << survivor.output;
  EXPECT_LT(survivor.seconds, 30.0) << survivor.output;
  EXPECT_NE(survivor.output.find("rank 1 stopped reporting (dead or stalled)"), std::string::npos) << survivor.output;
  expect_nothing_left(out);
}

// Under torchrun a stalled worker is alive to its agent: rank 0's in-process timeout must end the job.
TEST(Faults, UnderTorchrunTheInProcessTimeoutEndsAStalledJob) {
  const std::string torchrun = testing::venv_program("torchrun");
  if (access(torchrun.c_str(), X_OK) != 0) GTEST_SKIP() << "torchrun not found at " << torchrun << " (make setup)";
  const std::string out = ::testing::TempDir() + "dtlab_fault_torchrun";
  const auto job = testing::run_job({torchrun, "--standalone", "--nproc-per-node=2", "--no-python", kBin + "dtlab",
                                     "train", "--config", kConfig, "train.steps=200", "--out", out, "--timeout", "8"},
                                    120, {"DTLAB_INJECT_FAULT=1:3:stop"});
  EXPECT_NE(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("Timed out"), std::string::npos) << job.output;
  EXPECT_NE(job.output.find("rank 1 stopped reporting (dead or stalled)"), std::string::npos) << job.output;
  expect_nothing_left(out);
}

// A NaN gradient in fp32 (no loss scaler to skip it): every rank stops at that step, naming it.
class NanGradient : public ::testing::TestWithParam<std::string> {};

TEST_P(NanGradient, EveryRankStopsAtTheStepNamingIt) {
  const std::string out = ::testing::TempDir() + "dtlab_fault_nan_" + GetParam();
  const auto job =
      launched_job(out, 2, "DTLAB_INJECT_INF=1:3:nan", {"parallel.strategy=" + GetParam(), "train.micro_batch=4"});
  EXPECT_NE(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("[rank 0] dtlab: error: training: gradient norm is nan at step 3/200"), std::string::npos)
      << job.output;
  expect_nothing_left(out);
}

INSTANTIATE_TEST_SUITE_P(Strategies, NanGradient, ::testing::Values("ddp", "fsdp_full_shard"));

}  // namespace
}  // namespace dtlab
