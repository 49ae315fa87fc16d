// dist_world.hpp: a multi-process World — TCPStore rendezvous, then a Gloo (CPU tensors) or NCCL
// (CUDA tensors, cuda configuration) backend, sub-groups through prefix stores.
//
// Rendezvous: rank 0 hosts the TCPStore on a socket it binds itself — to 127.0.0.1 when MASTER_ADDR
// is a loopback address, elsewhere only to an address given explicitly (RendezvousOptions::bind_addr,
// `dtlab train --bind`). Under torchrun's agent store every rank is a client under its prefix. Every
// rank then registers; rank 0 waits until all have, so failures are clear and bounded by the timeout:
//   port in use      -> "rank 0 cannot listen on 127.0.0.1:29500: Address already in use ..."
//   unreachable      -> "rank 1 could not reach the rendezvous store at 127.0.0.1:29501 within 10 s ..."
//   ranks missing    -> "rendezvous: 1/2 ranks joined within 10 s (missing: 1) ..." on every rank
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <c10/util/intrusive_ptr.h>

#include "lab/dist/progress_board.hpp"
#include "lab/dist/rank_env.hpp"
#include "lab/dist/store_board.hpp"
#include "lab/world.hpp"

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

namespace dtlab {

struct RendezvousError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct RendezvousOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};  // rendezvous and each collective
  std::string bind_addr;         // "" = loopback when MASTER_ADDR is loopback, else required
  std::string backend = "gloo";  // gloo | nccl
  int gloo_threads = 1;
  bool check_collectives = false;  // instrument.check_collectives: every Comm checks for desyncs (desync_check.hpp)
};

bool is_loopback_address(const std::string& host);

class DistWorld final : public World {
 public:
  // Collective over all ranks of `env`. Throws RendezvousError with the cases above.
  DistWorld(const RankEnv& env, const RendezvousOptions& options);
  ~DistWorld() override;

  double all_reduce_sum(double value) override;
  double all_reduce_max(double value) override;
  Comm& comm() override { return *comm_; }
  std::shared_ptr<Comm> split(const std::string& name, const std::vector<std::vector<int>>& groups) override;
  std::vector<Comm*> all_comms() override;
  JobBoard* board() override { return board_.get(); }
  const RendezvousOptions& options() const { return options_; }

 private:
  c10::intrusive_ptr<c10d::Backend> make_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size);
  void set_wire_device(Comm& comm) const;   // the device the backend's tensors live on (lab/comm/comm.hpp: Devices)
  void set_desync_check(Comm& comm) const;  // with check_collectives: the group's check, through the store

  RendezvousOptions options_;
  std::string gloo_host_;
  // The job board (board()) and the heartbeat: where each rank says what it is doing (the step and the last
  // collective of every communicator).
  void start_boards(const RankEnv& env, const std::string& master);
  std::string progress_status() const;
  void attach(Comm& comm);

  c10::intrusive_ptr<c10d::Store> store_;
  std::shared_ptr<Comm> comm_;
  std::map<std::string, std::shared_ptr<Comm>> groups_;
  mutable std::mutex groups_mutex_;  // groups_ is read by the heartbeat thread
  std::unique_ptr<StoreBoard> board_;
  std::unique_ptr<ProgressBoard> progress_;  // declared last: its thread stops before the comms go
};

}  // namespace dtlab
