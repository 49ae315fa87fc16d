// world.hpp: who this process is in the job (rank, world size, launcher) and the scalar reductions
// the trainer needs for metrics. The single-process world is the trivial case; process groups and
// rendezvous build on this.
#pragma once

#include <cstdint>
#include <string>

namespace dtlab {

class World {
 public:
  virtual ~World() = default;
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }
  int local_world_size() const { return local_world_size_; }
  // Which launcher's environment gave the rank: none | dtlab | torchrun | openmpi | pmi | slurm | cli.
  const std::string& launcher() const { return launcher_; }
  bool is_main() const { return rank_ == 0; }

  // Sum / max of one scalar over all ranks (metrics, loss reporting). Collective: every rank calls it.
  virtual double all_reduce_sum(double value) = 0;
  virtual double all_reduce_max(double value) = 0;

 protected:
  int rank_ = 0, world_size_ = 1, local_rank_ = 0, local_world_size_ = 1;
  std::string launcher_ = "none";
};

// The one-process world: rank 0 of 1; reductions are the identity.
class SingleProcessWorld final : public World {
 public:
  double all_reduce_sum(double value) override { return value; }
  double all_reduce_max(double value) override { return value; }
};

}  // namespace dtlab
