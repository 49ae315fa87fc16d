// launch_env.cpp: what each rank of `dtlab launch` is started with — torchrun's environment and a free master port.
#include <cerrno>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lab/launch/launch_internal.hpp"

extern char** environ;

namespace dtlab::launch_internal {
namespace {

// Variables the launcher owns: an inherited value (e.g. from an outer torchrun) would contradict ours.
// TORCHELASTIC_* is dropped entirely so ranks never assume torchrun's agent hosts the store.
bool launcher_owns(const std::string& name) {
  static const char* const kOwned[] = {"RANK",
                                       "LOCAL_RANK",
                                       "WORLD_SIZE",
                                       "LOCAL_WORLD_SIZE",
                                       "GROUP_RANK",
                                       "GROUP_WORLD_SIZE",
                                       "ROLE_RANK",
                                       "ROLE_WORLD_SIZE",
                                       "ROLE_NAME",
                                       "MASTER_ADDR",
                                       "MASTER_PORT",
                                       "NODE_RANK",
                                       "DTLAB_LAUNCHER",
                                       "DTLAB_JOB_COMMAND",
                                       "DTLAB_RESTART_COUNT",
                                       "DTLAB_NODE_ADDR",
                                       "DTLAB_HOST_RANKS",
                                       "DTLAB_INTER_LINK",
                                       "DTLAB_INTRA_LINK"};
  for (const char* owned : kOwned) {
    if (name == owned) return true;
  }
  return name.rfind("TORCHELASTIC_", 0) == 0;
}

}  // namespace

std::vector<std::string> rank_environment(int rank, const JobLayout& layout) {
  const bool cluster = !layout.node_addresses.empty();
  const int node = rank / layout.ranks_per_node;
  std::vector<std::string> environment;
  bool omp_threads_set = false;
  for (char** entry = environ; entry && *entry; ++entry) {
    const std::string assignment(*entry);
    const std::string name = assignment.substr(0, assignment.find('='));
    if (launcher_owns(name)) continue;
    if (cluster && name == "GLOO_SOCKET_IFNAME") continue;  // the host's interface names mean nothing in a node
    if (name == "OMP_NUM_THREADS") omp_threads_set = true;
    environment.push_back(assignment);
  }
  auto set = [&](const char* name, const std::string& value) {
    environment.push_back(std::string(name) + "=" + value);
  };
  set("RANK", std::to_string(rank));
  set("LOCAL_RANK", std::to_string(rank % layout.ranks_per_node));
  set("WORLD_SIZE", std::to_string(layout.world_size()));
  set("LOCAL_WORLD_SIZE", std::to_string(layout.ranks_per_node));
  set("GROUP_RANK", std::to_string(node));
  set("NODE_RANK", std::to_string(node));
  set("GROUP_WORLD_SIZE", std::to_string(layout.nodes));
  set("MASTER_ADDR", layout.master_addr);
  set("MASTER_PORT", std::to_string(layout.master_port));
  set("DTLAB_LAUNCHER", "dtlab");
  set("DTLAB_RESTART_COUNT", std::to_string(layout.restart_count));
  set("DTLAB_HOST_RANKS", std::to_string(layout.world_size()));  // every rank runs on this machine's cores
  if (cluster) {
    set("DTLAB_NODE_ADDR", layout.node_addresses[static_cast<size_t>(node)]);
    set("GLOO_SOCKET_IFNAME", layout.node_interfaces[static_cast<size_t>(node)]);
    set("DTLAB_INTER_LINK", layout.inter_link);
    set("DTLAB_INTRA_LINK", layout.intra_link);
  }
  if (const char* job = std::getenv("DTLAB_JOB_COMMAND")) set("DTLAB_JOB_COMMAND", job);  // set by `dtlab launch`
  // N ranks on a few cores: one OpenMP thread each unless the user chose otherwise.
  if (!omp_threads_set) set("OMP_NUM_THREADS", "1");
  return environment;
}

PortHold::~PortHold() {
  if (fd_ >= 0) ::close(fd_);
}
PortHold::PortHold(PortHold&& other) noexcept : fd_(std::exchange(other.fd_, -1)), port_(other.port_) {}
PortHold& PortHold::operator=(PortHold&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    port_ = other.port_;
  }
  return *this;
}

// Binds 127.0.0.1:0 and keeps the socket (see launch_internal.hpp: an unlistened bound socket reserves the port).
PortHold hold_free_port() {
  PortHold hold;
  const int sock = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return hold;
  const int one = 1;
  ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (::bind(sock, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(sock, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const int err = errno;
    ::close(sock);
    errno = err;
    return hold;
  }
  hold.fd_ = sock;
  hold.port_ = ntohs(address.sin_port);
  return hold;
}

}  // namespace dtlab::launch_internal
