// verify_runs.hpp: runs configurations as real training jobs through this dtlab (`dtlab launch ... -- dtlab train`)
// and reads back what they measured — how `dtlab advise --verify` and `dtlab max-batch` check a prediction.
//
//   VerifyJob job{.config_path = "scenarios/configs/small.yaml", .world_size = 2, .budget_bytes = 512 << 20};
//   Measured m = run_job(job, {"parallel.strategy=ddp"}, "results/advice/01-ddp");
//   // m.status: completed | oom | failed; m.step_ms_median, m.peak_bytes; the run's output in <dir>/log.txt
//
// Every job runs under memory.limit = the budget (the lab's cap refuses allocations past it the way a GPU would),
// with the machine profile (so its result.json carries the prediction next to the measurement), for `steps` steps
// of which instrument.warmup_steps=2 are left out of the median. With nodes > 1 it runs on an emulated cluster
// (`dtlab launch --nodes`, needs CAP_NET_ADMIN).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace dtlab::cli {

struct VerifyJob {
  std::string config_path;
  std::vector<std::string> overrides;  // the user's, before each run's own
  int world_size = 1, nodes = 1;
  std::string inter_link, intra_link;  // with nodes > 1 ("" = unshaped)
  std::string profile_path;            // instrument.profile ("" = none)
  long long budget_bytes = 0;          // memory.limit (0 = no cap)
  int steps = 8;
};

struct Measured {
  std::string status;  // completed | oom | failed
  int exit_code = 0;
  double step_ms_median = 0;  // completed
  double peak_bytes = 0;      // completed: the largest tensor peak of any rank; oom: in use + the refused request
  std::string oom_message;    // oom: the refusal (rank, category, bytes, cap)
  std::filesystem::path dir;
  std::string command;  // the job's command line, to run it again
};

// Runs one job into `dir` (emptied first; the run's stdout and stderr go to <dir>/log.txt) and reads its
// result.json. A job that fails for any other reason than memory is `failed`, with the exit code.
Measured run_job(const VerifyJob& job, const std::vector<std::string>& overrides, const std::filesystem::path& dir);

}  // namespace dtlab::cli
