// dist_world.cpp: TCPStore rendezvous, the join protocol and backends (see dist_world.hpp).
#include "lab/dist/dist_world.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <thread>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "lab/comm/comm.hpp"
#include "lab/comm/desync_check.hpp"
#include "lab/comm/gloo_backend.hpp"
#include "lab/comm/nccl_backend.hpp"
#include "lab/instrument/step_profiler.hpp"

namespace dtlab {

namespace {

using Clock = std::chrono::steady_clock;

std::string seconds_text(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

// A listening TCP socket on addr:port, or a RendezvousError saying why not.
int listen_socket(const std::string& addr, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw RendezvousError("rendezvous: socket() failed: " + std::string(std::strerror(errno)));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // not SO_REUSEPORT: a live listener still conflicts
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) {
    ::close(fd);
    throw RendezvousError("rendezvous: bind address '" + addr + "' is not an IPv4 address");
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 256) != 0) {
    const int err = errno;
    ::close(fd);
    throw RendezvousError("rendezvous: rank 0 cannot listen on " + addr + ":" + std::to_string(port) + ": " +
                          std::strerror(err) +
                          (err == EADDRINUSE ? " (another job or program holds this port; choose another MASTER_PORT, "
                                               "or let `dtlab launch` pick a free one)"
                                             : ""));
  }
  return fd;
}

// Waits until something accepts TCP connections at host:port, or the deadline passes. LibTorch's
// client retries a full timeout per attempt (a 5 s timeout fails after ~12 s); probing first keeps the
// failure within the timeout and the message ours.
bool wait_for_listener(const std::string& host, int port, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  while (true) {
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) == 0) {
      for (addrinfo* a = found; a; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        const bool ok = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
        ::close(fd);
        if (ok) {
          ::freeaddrinfo(found);
          return true;
        }
      }
      ::freeaddrinfo(found);
    }
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

bool is_loopback_address(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  if (::inet_pton(AF_INET, host.c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  return false;
}

DistWorld::DistWorld(const RankEnv& env, const RendezvousOptions& options) : options_(options) {
  // Gloo's TCP pairs write to their peers with writev, which raises SIGPIPE once a peer has died. Python ignores
  // SIGPIPE at startup (so PyTorch's ranks get EPIPE, an error), a C++ process does not: without this, the survivor of
  // a dead rank could die silently of the signal instead of reporting which rank stopped.
  std::signal(SIGPIPE, SIG_IGN);
  rank_ = env.rank;
  world_size_ = env.world_size;
  local_rank_ = env.local_rank;
  local_world_size_ = env.local_world_size;
  host_ranks_ = env.host_ranks;
  launcher_ = env.launcher;
  const bool loopback = is_loopback_address(env.master_addr);
  // The store listens on `master` itself when it is loopback (127.0.0.2 must not listen on 127.0.0.1,
  // or no client reaches it); the IPv4 listener serves the names localhost and ::1 as 127.0.0.1.
  const std::string master = env.master_addr == "localhost" || env.master_addr == "::1" ? "127.0.0.1" : env.master_addr;
  // On an emulated cluster (dtlab launch --nodes) each rank binds to its node's address unless told otherwise.
  const std::string bind_addr = options.bind_addr.empty() ? env.node_addr : options.bind_addr;
  if (!loopback && bind_addr.empty() && !env.agent_store)
    throw RendezvousError("rendezvous: MASTER_ADDR=" + env.master_addr +
                          " is not a loopback address; choose the interface rank 0's store listens on explicitly "
                          "with `dtlab train --bind ADDR` (e.g. that host's address, or 0.0.0.0 for all)");
  gloo_host_ = loopback ? "127.0.0.1" : (bind_addr.empty() || bind_addr == "0.0.0.0" ? master : bind_addr);

  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(env.master_port);
  so.isServer = rank_ == 0 && !env.agent_store;
  so.numWorkers = std::nullopt;  // the join protocol below counts ranks, with a clear message
  so.waitWorkers = false;
  so.timeout = options.timeout;
  so.multiTenant = false;
  const auto connect_deadline = Clock::now() + options.timeout;
  if (!so.isServer && !wait_for_listener(master, env.master_port, connect_deadline))
    throw RendezvousError("rendezvous: rank " + std::to_string(rank_) + " could not reach the rendezvous store at " +
                          master + ":" + std::to_string(env.master_port) + " within " + seconds_text(options.timeout) +
                          " (is rank 0 running? are MASTER_ADDR/MASTER_PORT right?)");
  if (so.isServer) so.masterListenFd = listen_socket(loopback ? master : bind_addr, env.master_port);
  try {
    store_ = c10::make_intrusive<c10d::TCPStore>(master, so);
  } catch (const std::exception& e) {
    if (so.isServer) throw RendezvousError("rendezvous: rank 0 could not start the store: " + std::string(e.what()));
    throw RendezvousError("rendezvous: rank " + std::to_string(rank_) + " could not reach the rendezvous store at " +
                          master + ":" + std::to_string(env.master_port) + " within " + seconds_text(options.timeout) +
                          " (is rank 0 running? are MASTER_ADDR/MASTER_PORT right?): " + e.what());
  }
  if (env.agent_store) store_ = c10::make_intrusive<c10d::PrefixStore>(env.store_prefix, store_);

  // Join: every rank registers; rank 0 waits for all, then says go (or says who is missing).
  const std::string rank_key = "dtlab/joined/" + std::to_string(rank_);
  store_->set(rank_key, std::vector<uint8_t>{1});
  store_->add("dtlab/joined", 1);
  const auto deadline = Clock::now() + options.timeout;
  if (rank_ == 0) {
    int64_t joined = 0;
    while ((joined = store_->add("dtlab/joined", 0)) < world_size_ && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (joined < world_size_) {
      std::string missing;
      for (int r = 0; r < world_size_; ++r)
        if (!store_->check({"dtlab/joined/" + std::to_string(r)}))
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      const std::string message = "rendezvous: " + std::to_string(joined) + "/" + std::to_string(world_size_) +
                                  " ranks joined within " + seconds_text(options.timeout) + " (missing: " + missing +
                                  "); start every rank, or raise the timeout";
      store_->set("dtlab/failed", std::vector<uint8_t>(message.begin(), message.end()));
      throw RendezvousError(message);
    }
    store_->set("dtlab/go", std::vector<uint8_t>{1});
  } else {
    while (true) {
      if (store_->check({"dtlab/go"})) break;
      if (store_->check({"dtlab/failed"})) {
        auto bytes = store_->get("dtlab/failed");
        throw RendezvousError(std::string(bytes.begin(), bytes.end()));
      }
      if (Clock::now() >= deadline)
        throw RendezvousError("rendezvous: rank " + std::to_string(rank_) +
                              " joined, but rank 0 did not confirm that all " + std::to_string(world_size_) +
                              " ranks joined within " + seconds_text(options.timeout));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  auto world_store = c10::make_intrusive<c10d::PrefixStore>("dtlab/group/world/", store_);
  comm_ = std::make_shared<Comm>(make_backend(world_store, rank_, world_size_), "world", rank_, world_size_, rank_);
  set_wire_device(*comm_);
  set_desync_check(*comm_);
  start_boards(env, master);
}

void DistWorld::start_boards(const RankEnv& env, const std::string& master) {
  const int port = env.master_port;
  const bool agent_store = env.agent_store;
  const std::string prefix = env.store_prefix;
  auto make_store = [master, port, agent_store, prefix](std::chrono::milliseconds timeout) {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(port);
    so.isServer = false;
    so.waitWorkers = false;
    so.timeout = timeout;
    c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::TCPStore>(master, so);
    if (agent_store) store = c10::make_intrusive<c10d::PrefixStore>(prefix, store);
    return store;
  };
  board_ = std::make_unique<StoreBoard>(make_store);
  progress_ = std::make_unique<ProgressBoard>(make_store, master + ":" + std::to_string(port), rank_, world_size_,
                                              [this] { return progress_status(); });
  attach(*comm_);
}

std::string DistWorld::progress_status() const {
  std::string status = "step " + std::to_string(StepProfiler::instance().step());
  std::string last = comm_->last_issued();
  {
    std::lock_guard<std::mutex> lock(groups_mutex_);
    for (const auto& [name, comm] : groups_)
      if (const std::string l = comm->last_issued(); !l.empty()) last += (last.empty() ? "" : ", ") + l;
  }
  return status + (last.empty() ? ", no collective yet" : ", last collective " + last);
}

void DistWorld::attach(Comm& comm) {
  ProgressBoard* board = progress_.get();
  comm.explain_failure = [board] { return board->diagnose(); };
}

DistWorld::~DistWorld() = default;

void DistWorld::set_wire_device(Comm& comm) const {
  // NCCL works on this rank's GPU (make_nccl_backend made cuda:local_rank current); Gloo on host tensors.
  if (options_.backend == "nccl")
    comm.set_wire_device(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(local_rank_)));
}

void DistWorld::set_desync_check(Comm& comm) const {
  if (!options_.check_collectives) return;
  auto store = c10::make_intrusive<c10d::PrefixStore>("dtlab/desync/" + comm.group_name() + "/", store_);
  comm.check_collectives(
      std::make_shared<DesyncCheck>(store, comm.group_name(), comm.rank(), comm.size(), options_.timeout));
}

c10::intrusive_ptr<c10d::Backend> DistWorld::make_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                          int size) {
  if (options_.backend == "gloo")
    return comm::make_gloo_backend(store, rank, size, options_.timeout, gloo_host_, options_.gloo_threads);
  if (options_.backend == "nccl") return comm::make_nccl_backend(store, rank, size, options_.timeout, local_rank_);
  throw RendezvousError("parallel.backend='" + options_.backend + "' is not one of gloo | nccl");
}

std::shared_ptr<Comm> DistWorld::split(const std::string& name, const std::vector<std::vector<int>>& groups) {
  if (groups_.count(name)) throw std::invalid_argument("world split '" + name + "' exists already");
  std::vector<int> seen(static_cast<size_t>(world_size_), 0);
  int my_group = -1, my_rank = -1;
  for (size_t g = 0; g < groups.size(); ++g)
    for (size_t i = 0; i < groups[g].size(); ++i) {
      const int r = groups[g][i];
      if (r < 0 || r >= world_size_ || seen[static_cast<size_t>(r)]++)
        throw std::invalid_argument("world split '" + name + "': rank " + std::to_string(r) +
                                    " is out of range or in two groups");
      if (r == rank_) my_group = static_cast<int>(g), my_rank = static_cast<int>(i);
    }
  if (my_group < 0)
    throw std::invalid_argument("world split '" + name + "': rank " + std::to_string(rank_) + " is in no group");
  const std::string group_name = name + "." + std::to_string(my_group);
  auto store = c10::make_intrusive<c10d::PrefixStore>("dtlab/group/" + group_name + "/", store_);
  const int size = static_cast<int>(groups[static_cast<size_t>(my_group)].size());
  auto comm = std::make_shared<Comm>(make_backend(store, my_rank, size), group_name, my_rank, size, rank_);
  set_wire_device(*comm);
  set_desync_check(*comm);
  attach(*comm);
  std::lock_guard<std::mutex> lock(groups_mutex_);
  groups_[name] = comm;
  return comm;
}

std::vector<Comm*> DistWorld::all_comms() {
  std::lock_guard<std::mutex> lock(groups_mutex_);
  std::vector<Comm*> out = {comm_.get()};
  for (auto& [name, comm] : groups_) out.push_back(comm.get());
  return out;
}

double DistWorld::all_reduce_sum(double value) {
  at::Tensor t = at::full({1}, value, at::kDouble);
  comm_->all_reduce(t, "metric").wait();
  return t.item<double>();
}

double DistWorld::all_reduce_max(double value) {
  // Gloo supports MAX, but Comm exposes sum only: max via gather of all values (tiny).
  at::Tensor all = at::zeros({world_size_}, at::kDouble);
  all[rank_] = value;
  comm_->all_reduce(all, "metric").wait();
  return all.max().item<double>();
}

}  // namespace dtlab
