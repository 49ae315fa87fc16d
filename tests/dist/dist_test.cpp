// dist_test.cpp: the distributed runtime on real processes (RELIABILITY A2, C17).
//   * `dtlab launch -n W comm_rank` for W = 2, 3, 4: ring vs backend collectives, records, replica check;
//   * `dtlab launch -n 4 mesh_rank DIMS` for five meshes: every mesh dimension's communicator joins the ranks the
//     device mesh says (lab/dist/mesh_comms.hpp);
//   * `dtlab launch -n 2 desync_rank`: the desync check (instrument.check_collectives, RELIABILITY C16) stops every
//     rank with one message naming the ranks, the call and both signatures, for a skipped call, a reshaped call and
//     a ring call of another size; without a desync the same collectives agree, with the check on or off;
//   * comm_rank ranks started by hand with the plain RANK/WORLD_SIZE/MASTER_* environment on loopback
//     addresses other than 127.0.0.1 (the store must listen where the clients connect);
//   * rendezvous failures of `dtlab train`: port in use, unreachable master, a missing rank, and a
//     non-loopback MASTER_ADDR without --bind — each must fail, fast, with a message that says what.
// Every child runs in its own process group with stdout+stderr captured through one pipe; each run has
// its own deadline, after which the group gets SIGTERM and then SIGKILL, so no test can hang the suite.
// Only 127.0.0.x is ever contacted; 192.0.2.1 (TEST-NET-1) is refused before any socket is opened.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;

const std::string kBin = std::string(DTLAB_BINARY_DIR) + "/bin/";
const std::string kDtlab = kBin + "dtlab";
const std::string kCommRank = kBin + "comm_rank";
const std::string kDesyncRank = kBin + "desync_rank";
const std::string kMeshRank = kBin + "mesh_rank";

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// What to run: argv, plus environment changes (a value of std::nullopt removes the variable).
struct Spawn {
  std::vector<std::string> argv;
  std::map<std::string, std::optional<std::string>> env_changes;
};

struct Outcome {
  int exit_code = -1;  // exit status, or 128 + signal
  std::string output;  // stdout and stderr, interleaved as written
  double seconds = 0;  // from start until exit
  bool timed_out = false;

  std::string describe() const {
    return "exit " + std::to_string(exit_code) + (timed_out ? " (killed at the test's deadline)" : "") + " after " +
           std::to_string(seconds) + " s; output:\n" + output;
  }
};

struct Child {
  pid_t pid = -1;
  int out_fd = -1;
  bool exited = false;
  Outcome outcome;
};

// The environment block for execve: ours with `changes` applied.
std::vector<std::string> child_environment(const std::map<std::string, std::optional<std::string>>& changes) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [name, value] : changes) {
    if (value)
      env[name] = *value;
    else
      env.erase(name);
  }
  std::vector<std::string> block;
  for (const auto& [name, value] : env) block.push_back(name + "=" + value);
  return block;
}

Child start(const Spawn& spawn) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<std::string> args = spawn.argv, env = child_environment(spawn.env_changes);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);  // its own group: the deadline kill reaches everything it started in it
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  setpgid(pid, pid);  // also from here, so the group exists before we might signal it
  close(fds[1]);
  Child child;
  child.pid = pid;
  child.out_fd = fds[0];
  return child;
}

// Collects output until every child has exited and closed its output, or the deadline passes; then
// stops what is left (SIGTERM to the group, SIGKILL after a grace period) and reaps it.
void finish(std::vector<Child>& children, double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  auto reap = [&](Child& c, int flags) {
    int status = 0;
    if (!c.exited && waitpid(c.pid, &status, flags) == c.pid) {
      c.exited = true;
      c.outcome.seconds = seconds_since(start);
      c.outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
  };
  auto all_done = [&] {
    for (const Child& c : children)
      if (!c.exited || c.out_fd >= 0) return false;
    return true;
  };
  while (!all_done() && seconds_since(start) < timeout_s) {
    std::vector<pollfd> polled;
    for (const Child& c : children)
      if (c.out_fd >= 0) polled.push_back({c.out_fd, POLLIN, 0});
    if (!polled.empty())
      ::poll(polled.data(), polled.size(), 50);
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (Child& c : children) {
      if (c.out_fd >= 0) {
        pollfd probe{c.out_fd, POLLIN, 0};
        if (::poll(&probe, 1, 0) > 0) {
          char buffer[65536];
          const ssize_t n = read(c.out_fd, buffer, sizeof buffer);
          if (n > 0) {
            c.outcome.output.append(buffer, static_cast<size_t>(n));
          } else if (n == 0 || errno != EINTR) {
            close(c.out_fd);
            c.out_fd = -1;
          }
        }
      }
      reap(c, WNOHANG);
    }
  }
  for (Child& c : children) {
    if (!c.exited) {
      c.outcome.timed_out = true;
      kill(-c.pid, SIGTERM);  // dtlab launch forwards this to its ranks
      for (int i = 0; i < 60 && !c.exited; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        reap(c, WNOHANG);
      }
      kill(-c.pid, SIGKILL);
      reap(c, 0);
    }
    kill(-c.pid, SIGKILL);  // anything left in its group (ESRCH when empty, which is the normal case)
    if (c.out_fd >= 0) close(c.out_fd);
    c.out_fd = -1;
  }
}

Outcome run(const Spawn& spawn, double timeout_s) {
  std::vector<Child> children{start(spawn)};
  finish(children, timeout_s);
  return children[0].outcome;
}

int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

// A loopback socket bound to port 0 (the kernel picks a free port); listening if asked. Close to free.
struct LoopbackSocket {
  int fd = -1;
  int port = 0;
  explicit LoopbackSocket(bool listening) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = 0;
    socklen_t len = sizeof sa;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || (listening && ::listen(fd, 4) != 0) ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0)
      throw std::runtime_error(std::string("loopback socket: ") + std::strerror(errno));
    port = ntohs(sa.sin_port);
  }
  ~LoopbackSocket() { close_now(); }
  void close_now() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

// A port nothing listens on right now (bound, read, released).
int free_loopback_port() {
  LoopbackSocket probe(false);
  return probe.port;
}

// --- comm_rank under dtlab launch -------------------------------------------------------------

class CommRankJob : public ::testing::TestWithParam<int> {};

TEST_P(CommRankJob, RingMatchesBackendRecordsAndReplicaCheck) {
  const int world = GetParam();
  const Outcome job = run({{kDtlab, "launch", "-n", std::to_string(world), "--timeout", "60", kCommRank}, {}}, 75);
  ASSERT_FALSE(job.timed_out) << job.describe();
  EXPECT_EQ(job.exit_code, 0) << job.describe();
  EXPECT_EQ(count_of(job.output, "comm_rank: all checks passed"), world) << job.describe();
  EXPECT_EQ(count_of(job.output, "FAIL"), 0) << job.describe();
  // Every rank ran the uneven and n < p sizes (the size list always has both for W <= 6).
  EXPECT_GE(count_of(job.output, "(uneven)"), world) << job.describe();
  EXPECT_GE(count_of(job.output, "(n < p)"), world) << job.describe();
  // At 4 and 6 ranks, the hierarchical all-reduce as 2 nodes x 2 and 2 nodes x 3.
  if (world == 4 || world == 6) {
    EXPECT_EQ(count_of(job.output, "ok   hierarchical records: op, level, group, size and bytes per level"), world)
        << job.describe();
    // ... and its reduce-scatter and all-gather: 2 nodes x 2 at 4 ranks; 2 nodes x 3 and 3 nodes x 2 at 6.
    EXPECT_EQ(count_of(job.output, "ok   hierarchical shard records on"), world == 4 ? world : 2 * world)
        << job.describe();
  }
}

// A ring that fails on a lost peer fails the ring calls queued behind it, naming it, without a hang (comm_rank.cpp).
TEST(CommRingFailure, ALaterRingIsNotRunAndNamesTheOneThatFailed) {
  const Outcome job = run({{kDtlab, "launch", "-n", "2", "--timeout", "30", kCommRank, "--ring-failure"}, {}}, 60);
  ASSERT_FALSE(job.timed_out) << job.describe();
  EXPECT_EQ(job.exit_code, 0) << job.describe();
  EXPECT_EQ(count_of(job.output, "comm_rank: ring failure checks passed"), 1) << job.describe();
  EXPECT_EQ(count_of(job.output, "FAIL"), 0) << job.describe();
  EXPECT_LT(job.seconds, 30.0) << "a failed ring must not wait for the collective timeout" << job.describe();
}

INSTANTIATE_TEST_SUITE_P(World, CommRankJob, ::testing::Values(2, 3, 4, 6),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string("W").append(std::to_string(info.param));
                         });

// --- mesh_rank: one communicator per mesh dimension ----------------------------------------------

class MeshRankJob : public ::testing::TestWithParam<std::string> {};

TEST_P(MeshRankJob, EveryDimensionsCommunicatorJoinsTheMeshsRanks) {
  const Outcome job = run({{kDtlab, "launch", "-n", "4", "--timeout", "60", kMeshRank, GetParam()}, {}}, 75);
  ASSERT_FALSE(job.timed_out) << job.describe();
  EXPECT_EQ(job.exit_code, 0) << job.describe();
  EXPECT_EQ(count_of(job.output, "mesh_rank: all checks passed"), 4) << job.describe();
  EXPECT_EQ(count_of(job.output, "FAIL"), 0) << job.describe();
  // Six dimension sets (pp, dp_replicate, dp_shard, cp, tp, dp), four checks each, plus the count, on every rank.
  EXPECT_EQ(count_of(job.output, "ok  "), 4 * (6 * 4 + 1)) << job.describe();
}

INSTANTIATE_TEST_SUITE_P(Meshes, MeshRankJob,
                         ::testing::Values("dp_shard=4", "dp_replicate=2,dp_shard=2", "dp_shard=2,tp=2", "pp=2,tp=2",
                                           "pp=2,dp_replicate=2"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name;
                           for (char c : info.param) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

// --- the desync check over desync_rank (tests/dist/desync_rank.cpp) ------------------------------

// A desync_rank job of 2 with `args`, DTLAB_INJECT_DESYNC set to `injection` (none: "").
Outcome desync_job(const std::vector<std::string>& args, const std::string& injection) {
  std::vector<std::string> argv = {kDtlab, "launch", "-n", "2", "--timeout", "30", kDesyncRank};
  argv.insert(argv.end(), args.begin(), args.end());
  Spawn spawn{argv, {{"DTLAB_INJECT_DESYNC", injection.empty() ? std::nullopt : std::optional(injection)}}};
  return run(spawn, 60);
}

struct DesyncCase {
  const char* name;
  std::vector<std::string> args;
  std::string injection;
  std::string message;  // what every rank must print, after "desync_rank: error: "
};

class DesyncCheck : public ::testing::TestWithParam<DesyncCase> {};

// Every rank finds the desync itself (its own error line, the same message) and the job stops well before the
// collective timeout (20 s in desync_rank): nobody waits in a mismatched collective.
TEST_P(DesyncCheck, EveryRankStopsWithOneMessageNamingTheRanksAndBothSignatures) {
  const DesyncCase& c = GetParam();
  const Outcome job = desync_job(c.args, c.injection);
  ASSERT_FALSE(job.timed_out) << job.describe();
  EXPECT_NE(job.exit_code, 0) << job.describe();
  EXPECT_LT(job.seconds, 15.0) << job.describe();
  const std::string line = "desync_rank: error: " + c.message +
                           " (a rank that skipped a collective shows its next one "
                           "here)\n";
  for (const std::string rank : {"[rank 0] ", "[rank 1] "})
    EXPECT_EQ(count_of(job.output, rank + line), 1) << "expected from " << rank << ":\n" << line << job.describe();
  EXPECT_EQ(count_of(job.output, "desync_rank: all collectives agreed"), 0) << job.describe();
}

INSTANTIATE_TEST_SUITE_P(
    Injected, DesyncCheck,
    ::testing::Values(
        DesyncCase{"SkippedCall",
                   {"--check"},
                   "1:0:skip",
                   "collective desync on group 'world' (2 ranks) at call #0: rank 0 all_reduce sum float32[1024] "
                   "'test.desync.a' vs rank 1 broadcast root 0 float32[3,4] 'test.desync.b'"},
        DesyncCase{"ReshapedCall",
                   {"--check"},
                   "1:2:shape",
                   "collective desync on group 'world' (2 ranks) at call #2: rank 0 all_gather float32[8] -> 16 "
                   "'test.desync.c' vs rank 1 all_gather float32[9] -> 18 'test.desync.c'"},
        DesyncCase{"RingCallOfAnotherSize",
                   {"--check", "--ring-shape"},
                   "",
                   "collective desync on group 'world' (2 ranks) at ring call #0: rank 0 reduce_scatter sum "
                   "float32[10] -> 5 'test.desync.d' (ring) vs rank 1 reduce_scatter sum float32[12] -> 6 "
                   "'test.desync.d' (ring)"}),
    [](const ::testing::TestParamInfo<DesyncCase>& info) { return std::string(info.param.name); });

// Without a desync the check lets every collective through, with the same results as without it.
TEST(DesyncCheckAgreeing, TheSameCollectivesPassWithTheCheckOnAndOff) {
  for (const bool check : {true, false}) {
    const Outcome job = desync_job(check ? std::vector<std::string>{"--check"} : std::vector<std::string>{}, "");
    ASSERT_FALSE(job.timed_out) << job.describe();
    EXPECT_EQ(job.exit_code, 0) << job.describe();
    EXPECT_EQ(count_of(job.output, check ? "check on" : "check off"), 2) << job.describe();
    EXPECT_EQ(count_of(job.output, "desync_rank: all collectives agreed"), 2) << job.describe();
    EXPECT_EQ(count_of(job.output, "FAIL"), 0) << job.describe();
  }
}

// --- comm_rank ranks started by hand: the plain environment, other loopback addresses -----------

class HandStartedRanks : public ::testing::TestWithParam<std::string> {};

TEST_P(HandStartedRanks, RendezvousOnLoopbackAddress) {
  const std::string master_addr = GetParam();
  const int port = free_loopback_port();
  std::vector<Child> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.push_back(start({{kCommRank},
                           {{"RANK", std::to_string(r)},
                            {"WORLD_SIZE", "2"},
                            {"LOCAL_RANK", std::to_string(r)},
                            {"LOCAL_WORLD_SIZE", "2"},
                            {"MASTER_ADDR", master_addr},
                            {"MASTER_PORT", std::to_string(port)},
                            {"OMP_NUM_THREADS", "1"},
                            {"DTLAB_LAUNCHER", std::nullopt},
                            {"TORCHELASTIC_RUN_ID", std::nullopt},
                            {"TORCHELASTIC_USE_AGENT_STORE", std::nullopt}}}));
  finish(ranks, 45);
  for (int r = 0; r < 2; ++r) {
    const Outcome& o = ranks[static_cast<size_t>(r)].outcome;
    EXPECT_EQ(o.exit_code, 0) << "rank " << r << " with MASTER_ADDR=" << master_addr << ": " << o.describe();
    EXPECT_NE(o.output.find("launcher env"), std::string::npos) << o.describe();
    EXPECT_NE(o.output.find("comm_rank: all checks passed"), std::string::npos) << o.describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Address, HandStartedRanks, ::testing::Values("127.0.0.2", "localhost"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name;
                           for (char c : info.param) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

// --- rendezvous failures of `dtlab train` --------------------------------------------------------

class RendezvousError : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/dtlab_dist_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    std::ofstream(dir_ / "tiny.yaml") << "model: {preset: tiny}\n";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // `dtlab train` as rank `rank` of 2 with a 5 s rendezvous timeout, plus `extra` flags.
  Spawn train(int rank, int port, const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> argv = {kDtlab,
                                     "train",
                                     "--config",
                                     (dir_ / "tiny.yaml").string(),
                                     "model.preset=tiny",
                                     "train.steps=2",
                                     "train.warmup_steps=0",
                                     "parallel.strategy=ddp",
                                     "train.micro_batch=4",
                                     "train.global_batch=8",
                                     "--out",
                                     (dir_ / ("out" + std::to_string(rank))).string(),
                                     "--rank",
                                     std::to_string(rank),
                                     "--world-size",
                                     "2",
                                     "--master-port",
                                     std::to_string(port),
                                     "--timeout",
                                     "5"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return {argv, {{"OMP_NUM_THREADS", "1"}}};
  }

  fs::path dir_;
};

TEST_F(RendezvousError, PortInUse) {
  LoopbackSocket occupant(true);  // a live listener on the port rank 0 is told to use
  const Outcome o = run(train(0, occupant.port), 30);
  ASSERT_FALSE(o.timed_out) << o.describe();
  EXPECT_NE(o.exit_code, 0) << o.describe();
  EXPECT_LT(o.seconds, 10.0) << o.describe();
  EXPECT_NE(o.output.find("Address already in use"), std::string::npos) << o.describe();
  EXPECT_NE(o.output.find("127.0.0.1:" + std::to_string(occupant.port)), std::string::npos) << o.describe();
}

TEST_F(RendezvousError, UnreachableMaster) {
  const int port = free_loopback_port();  // 127.0.0.1 only; nothing listens there
  const Outcome o = run(train(1, port), 40);
  ASSERT_FALSE(o.timed_out) << o.describe();
  EXPECT_NE(o.exit_code, 0) << o.describe();
  EXPECT_LT(o.seconds, 20.0) << o.describe();
  EXPECT_NE(o.output.find("could not reach the rendezvous store"), std::string::npos) << o.describe();
  EXPECT_NE(o.output.find("rank 1"), std::string::npos) << o.describe();
  EXPECT_NE(o.output.find(std::string(":").append(std::to_string(port))), std::string::npos) << o.describe();
}

TEST_F(RendezvousError, MissingRank) {
  const Outcome o = run(train(0, free_loopback_port()), 40);
  ASSERT_FALSE(o.timed_out) << o.describe();
  EXPECT_NE(o.exit_code, 0) << o.describe();
  EXPECT_GE(o.seconds, 4.0) << "gave up before the 5 s timeout: " << o.describe();
  EXPECT_LT(o.seconds, 20.0) << o.describe();
  EXPECT_NE(o.output.find("1/2 ranks joined"), std::string::npos) << o.describe();
  EXPECT_NE(o.output.find("missing: 1"), std::string::npos) << o.describe();
}

TEST_F(RendezvousError, NonLoopbackMasterNeedsBind) {
  // 192.0.2.1 is TEST-NET-1; dtlab must refuse before opening any socket, so nothing is contacted.
  for (int rank : {0, 1}) {
    const Outcome o = run(train(rank, free_loopback_port(), {"--master-addr", "192.0.2.1"}), 20);
    ASSERT_FALSE(o.timed_out) << o.describe();
    EXPECT_NE(o.exit_code, 0) << o.describe();
    EXPECT_LT(o.seconds, 5.0) << o.describe();
    EXPECT_NE(o.output.find("--bind"), std::string::npos) << o.describe();
    EXPECT_NE(o.output.find("192.0.2.1"), std::string::npos) << o.describe();
  }
}

}  // namespace
