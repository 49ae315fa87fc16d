// world.hpp: who this process is in the job (rank, world size, launcher), its communicator, and the
// scalar reductions the trainer needs for metrics. SingleProcessWorld is the trivial case;
// lab/dist/dist_world.hpp is the multi-process one (TCPStore rendezvous + Gloo/NCCL).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtlab {

class Comm;

// A key-value board every rank of the job reaches without collectives — the rendezvous store — for agreeing on a
// stop when collectives may never complete (lab/train/oom_stop.hpp). Thread-safe. Operations throw
// std::runtime_error when the board cannot be reached.
class JobBoard {
 public:
  virtual ~JobBoard() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  virtual std::optional<std::string> get(const std::string& key) = 0;  // nullopt: not set
  virtual int64_t add(const std::string& key, int64_t delta) = 0;      // the new value (a missing key counts as 0)
  // Calls `handler(value)` once, on the board's own thread, when `key` is set (polled every 50 ms), so a rank whose
  // main thread is blocked in a collective still hears. One watch per board; the handler may end the process.
  virtual void watch(const std::string& key, std::function<void(const std::string& value)> handler) = 0;
};

class World {
 public:
  virtual ~World() = default;
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }
  int local_world_size() const { return local_world_size_; }
  // Ranks sharing this machine's cores (the local world, or every rank of an emulated cluster): sizes threads.
  int host_ranks() const { return host_ranks_; }
  // Which launcher's environment gave the rank: none | cli | dtlab | torchrun | env | openmpi | pmi | slurm.
  const std::string& launcher() const { return launcher_; }
  bool is_main() const { return rank_ == 0; }

  // Sum / max of one scalar over all ranks (metrics, loss reporting, agreed decisions). Collective.
  virtual double all_reduce_sum(double value) = 0;
  virtual double all_reduce_max(double value) = 0;

  // The communicator of all ranks. Throws in a single-process world.
  virtual Comm& comm() = 0;
  // Splits the world into groups (every rank in exactly one; all ranks call it with the same
  // `groups`, in the same order) and returns this rank's group communicator. `name` must be unique.
  virtual std::shared_ptr<Comm> split(const std::string& name, const std::vector<std::vector<int>>& groups) = 0;
  // Every communicator of this rank: the world's, then the groups from split() (records, audits).
  virtual std::vector<Comm*> all_comms() = 0;
  // The job's board; nullptr in a single-process world (nobody to agree with).
  virtual JobBoard* board() { return nullptr; }

 protected:
  int rank_ = 0, world_size_ = 1, local_rank_ = 0, local_world_size_ = 1, host_ranks_ = 1;
  std::string launcher_ = "none";
};

// The one-process world: rank 0 of 1; reductions are the identity; there is no communicator.
class SingleProcessWorld final : public World {
 public:
  double all_reduce_sum(double value) override { return value; }
  double all_reduce_max(double value) override { return value; }
  Comm& comm() override {
    throw std::logic_error(
        "single-process world has no communicator (world_size=1); a strategy that "
        "communicates needs `dtlab launch -n N` or another launcher");
  }
  std::shared_ptr<Comm> split(const std::string&, const std::vector<std::vector<int>>&) override {
    comm();
    return nullptr;
  }
  std::vector<Comm*> all_comms() override { return {}; }
};

}  // namespace dtlab
