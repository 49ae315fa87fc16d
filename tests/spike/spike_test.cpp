// spike_test.cpp: runs the day-1 spike for real — two gloo_spike processes on 127.0.0.1 rendezvous
// through a TCPStore, build ProcessGroupGloo and all-reduce; both must exit 0 within 60 s.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace {

int free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

pid_t spawn(const std::vector<std::string>& args) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

TEST(Spike, TwoProcessesAllReduceOverGlooOnLoopback) {
  const std::string exe = std::string(DTLAB_BINARY_DIR) + "/bin/gloo_spike";
  const std::string port = std::to_string(free_loopback_port());
  std::vector<pid_t> pids = {spawn({exe, "0", "2", port}), spawn({exe, "1", "2", port})};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::vector<int> status(2, -1);
  size_t done = 0;
  while (done < pids.size() && std::chrono::steady_clock::now() < deadline) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (status[i] != -1) continue;
      int s = 0;
      if (waitpid(pids[i], &s, WNOHANG) == pids[i]) {
        status[i] = s;
        ++done;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    if (status[i] == -1) {
      kill(pids[i], SIGKILL);
      waitpid(pids[i], nullptr, 0);
      ADD_FAILURE() << "rank " << i << " did not finish within 60 s";
      continue;
    }
    EXPECT_TRUE(WIFEXITED(status[i]) && WEXITSTATUS(status[i]) == 0) << "rank " << i << " status " << status[i];
  }
}

}  // namespace
