// rank_env.hpp: who am I in the job — rank discovery from the command line or a launcher's environment.
//
// First match wins:
//   1. command line   (--rank/--world-size[/--local-rank/--master-addr/--master-port] of `dtlab train`)
//   2. torchrun / dtlab launch  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
//                     (dtlab launch adds DTLAB_LAUNCHER=dtlab, DTLAB_HOST_RANKS (every rank it starts shares this
//                      machine's cores, also on an emulated cluster), and on an emulated cluster DTLAB_NODE_ADDR, the
//                      address this rank's node has and binds to; torchrun sets TORCHELASTIC_RUN_ID; with
//                      TORCHELASTIC_USE_AGENT_STORE=True the agent hosts the store and every rank is a
//                      client under the prefix /worker/attempt_<TORCHELASTIC_RESTART_COUNT>)
//   3. Open MPI       OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE
//   4. PMI            PMI_RANK, PMI_SIZE (MPICH, Intel MPI)
//   5. SLURM          SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; master = first host of SLURM_JOB_NODELIST
//   otherwise a single process (launcher "none").
// For 3-5, MASTER_ADDR / MASTER_PORT from the environment win when set (default port 29500).
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>

namespace dtlab {

struct RankEnvError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct RankEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  // Ranks of this job that share this machine's cores: the local world, except under `dtlab launch --nodes M`,
  // whose emulated nodes are namespaces of one machine (DTLAB_HOST_RANKS = every rank). Threads per rank come from it.
  int host_ranks = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string launcher = "none";  // none | cli | dtlab | torchrun | openmpi | pmi | slurm
  bool agent_store = false;       // torchrun's agent hosts the TCPStore: every rank is a client
  std::string store_prefix;       // key prefix for the agent store ("/worker/attempt_0")
  std::string node_addr;          // dtlab launch --nodes: this rank's node address (DTLAB_NODE_ADDR); "" otherwise
};

// Values given on the command line (unset = not given).
struct RankArgs {
  std::optional<int> rank, world_size, local_rank;
  std::optional<std::string> master_addr;
  std::optional<int> master_port;
};

using EnvMap = std::map<std::string, std::string>;
EnvMap current_environment();

// Throws RankEnvError naming the variable, its value and the rule (e.g. RANK=3 >= WORLD_SIZE=2).
RankEnv discover_rank_env(const RankArgs& args, const EnvMap& env);

// First host of a SLURM node list: "gpu[07-09,12],cpu01" -> "gpu07"; "a,b" -> "a".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace dtlab
