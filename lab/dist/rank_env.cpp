// rank_env.cpp: rank discovery (see rank_env.hpp for the order and the variables).
#include "lab/dist/rank_env.hpp"

#include <cstdlib>

extern char** environ;

namespace dtlab {
namespace {

std::optional<std::string> get(const EnvMap& env, const std::string& key) {
  auto it = env.find(key);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

int parse_int(const std::string& name, const std::string& value, int min_value) {
  size_t used = 0;
  long parsed = 0;
  try {
    parsed = std::stol(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || value.empty())
    throw RankEnvError("rank discovery: " + name + "='" + value + "' is not an integer");
  if (parsed < min_value || parsed > 1 << 24)
    throw RankEnvError("rank discovery: " + name + "=" + value + " must be >= " + std::to_string(min_value));
  return static_cast<int>(parsed);
}

int int_or(const EnvMap& env, const std::string& key, int fallback, int min_value = 0) {
  auto v = get(env, key);
  return v ? parse_int(key, *v, min_value) : fallback;
}

void check_rank(const RankEnv& r, const std::string& rank_name, const std::string& size_name) {
  if (r.rank < 0 || r.local_rank < 0)  // the command line's values are not range-checked by parse_int
    throw RankEnvError("rank discovery (" + r.launcher + "): " + rank_name + "=" + std::to_string(r.rank) +
                       ", local rank " + std::to_string(r.local_rank) + ": ranks must be >= 0");
  if (r.rank >= r.world_size)
    throw RankEnvError("rank discovery (" + r.launcher + "): " + rank_name + "=" + std::to_string(r.rank) +
                       " must be < " + size_name + "=" + std::to_string(r.world_size));
  if (r.local_rank >= r.local_world_size)
    throw RankEnvError("rank discovery (" + r.launcher + "): local rank " + std::to_string(r.local_rank) +
                       " must be < local world size " + std::to_string(r.local_world_size));
  if (r.host_ranks < r.local_world_size || r.host_ranks > r.world_size)
    throw RankEnvError("rank discovery (" + r.launcher + "): DTLAB_HOST_RANKS=" + std::to_string(r.host_ranks) +
                       " must lie between the local world size " + std::to_string(r.local_world_size) +
                       " and the world size " + std::to_string(r.world_size) +
                       " (the ranks of the job that share this machine)");
  if (r.master_port < 1 || r.master_port > 65535)
    throw RankEnvError("rank discovery (" + r.launcher + "): MASTER_PORT=" + std::to_string(r.master_port) +
                       " is not a TCP port (1..65535)");
}

// MASTER_ADDR / MASTER_PORT from the environment when present (MPI, PMI and SLURM jobs).
void master_from_env(const EnvMap& env, RankEnv& r) {
  if (auto a = get(env, "MASTER_ADDR")) r.master_addr = *a;
  r.master_port = int_or(env, "MASTER_PORT", r.master_port, 1);
}

}  // namespace

EnvMap current_environment() {
  EnvMap env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

std::string first_slurm_host(const std::string& nodelist) {
  // The first entry ends at a comma that is outside brackets.
  int depth = 0;
  size_t end = nodelist.size();
  for (size_t i = 0; i < nodelist.size(); ++i) {
    if (nodelist[i] == '[') ++depth;
    if (nodelist[i] == ']') --depth;
    if (nodelist[i] == ',' && depth == 0) {
      end = i;
      break;
    }
  }
  const std::string first = nodelist.substr(0, end);
  const auto open = first.find('[');
  if (open == std::string::npos) return first;
  // prefix[07-09,12] -> prefix07 (keep the zero padding of the first number)
  const std::string inside = first.substr(open + 1, first.find(']') - open - 1);
  const auto stop = inside.find_first_of(",-");
  return first.substr(0, open) + inside.substr(0, stop);
}

RankEnv discover_rank_env(const RankArgs& args, const EnvMap& env) {
  RankEnv r;
  if (args.rank || args.world_size) {
    if (!args.rank || !args.world_size)
      throw RankEnvError("rank discovery: --rank and --world-size go together (got only " +
                         std::string(args.rank ? "--rank" : "--world-size") + ")");
    r.launcher = "cli";
    r.rank = *args.rank;
    r.world_size = *args.world_size;
    r.local_rank = args.local_rank.value_or(r.rank);
    r.local_world_size = r.world_size;  // the command line describes one machine
    r.host_ranks = r.world_size;
    master_from_env(env, r);
    if (args.master_addr) r.master_addr = *args.master_addr;
    if (args.master_port) r.master_port = *args.master_port;
    if (r.world_size < 1) throw RankEnvError("rank discovery: --world-size must be >= 1");
    check_rank(r, "--rank", "--world-size");
    return r;
  }
  if (get(env, "RANK") && get(env, "WORLD_SIZE")) {
    r.launcher = get(env, "DTLAB_LAUNCHER").value_or("") == "dtlab" ? "dtlab"
                 : get(env, "TORCHELASTIC_RUN_ID")                  ? "torchrun"
                                                                    : "env";
    r.rank = int_or(env, "RANK", 0);
    r.world_size = int_or(env, "WORLD_SIZE", 1, 1);
    r.local_rank = int_or(env, "LOCAL_RANK", r.rank);
    r.local_world_size = int_or(env, "LOCAL_WORLD_SIZE", r.world_size, 1);
    if (!get(env, "MASTER_ADDR") || !get(env, "MASTER_PORT"))
      throw RankEnvError("rank discovery (" + r.launcher +
                         "): RANK and WORLD_SIZE are set but MASTER_ADDR/MASTER_PORT are not; set both "
                         "(dtlab launch and torchrun do)");
    master_from_env(env, r);
    r.host_ranks = r.local_world_size;
    if (r.launcher == "dtlab") {
      r.node_addr = get(env, "DTLAB_NODE_ADDR").value_or("");
      r.host_ranks = int_or(env, "DTLAB_HOST_RANKS", r.local_world_size, 1);
    }
    const auto agent = get(env, "TORCHELASTIC_USE_AGENT_STORE");
    if (agent && (*agent == "True" || *agent == "true" || *agent == "1")) {
      r.agent_store = true;
      r.store_prefix = "/worker/attempt_" + get(env, "TORCHELASTIC_RESTART_COUNT").value_or("0");
    }
    check_rank(r, "RANK", "WORLD_SIZE");
    return r;
  }
  // The batch launchers: each names its rank / size / local rank / local size variables. SLURM's
  // local rank defaults to 0 (one task per node unless SLURM_LOCALID says otherwise); the master is the
  // first host of the job unless MASTER_ADDR is set.
  struct BatchLauncher {
    const char *name, *rank, *size, *local_rank, *local_size;
  };
  static const BatchLauncher kBatchLaunchers[] = {
      {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
  };
  for (const BatchLauncher& l : kBatchLaunchers) {
    if (!get(env, l.rank) || !get(env, l.size)) continue;
    const bool slurm = std::string(l.name) == "slurm";
    r.launcher = l.name;
    r.rank = int_or(env, l.rank, 0);
    r.world_size = int_or(env, l.size, 1, 1);
    r.local_rank = int_or(env, l.local_rank, slurm ? 0 : r.rank);
    r.local_world_size = int_or(env, l.local_size, r.world_size, 1);
    r.host_ranks = r.local_world_size;
    if (slurm)
      if (auto nodes = get(env, "SLURM_JOB_NODELIST")) r.master_addr = first_slurm_host(*nodes);
    master_from_env(env, r);
    check_rank(r, l.rank, l.size);
    return r;
  }
  return r;  // a single process
}

}  // namespace dtlab
