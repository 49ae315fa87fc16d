// verify_runs.cpp: one configuration as a real training job, and what it measured (see verify_runs.hpp).
#include "lab/cli/verify_runs.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <stdexcept>
#include <system_error>

#include "analysis/results.hpp"
#include "lab/cli/command.hpp"
#include "lab/process.hpp"

namespace dtlab::cli {
namespace fs = std::filesystem;

Measured run_job(const VerifyJob& job, const std::vector<std::string>& overrides, const fs::path& dir) {
  const std::string self = this_executable("advise").string();
  std::vector<std::string> argv = {self, "launch"};
  if (job.nodes > 1) {
    argv.insert(argv.end(), {"--nodes", std::to_string(job.nodes), "-n", std::to_string(job.world_size / job.nodes)});
    if (!job.inter_link.empty()) argv.insert(argv.end(), {"--inter-link", job.inter_link});
    if (!job.intra_link.empty()) argv.insert(argv.end(), {"--intra-link", job.intra_link});
  } else {
    argv.insert(argv.end(), {"-n", std::to_string(job.world_size)});
  }
  argv.insert(argv.end(), {"--", self, "train", "--config", job.config_path});
  argv.insert(argv.end(), job.overrides.begin(), job.overrides.end());
  argv.insert(argv.end(), overrides.begin(), overrides.end());
  argv.push_back("train.steps=" + std::to_string(job.steps));
  argv.push_back("instrument.warmup_steps=2");
  argv.push_back("instrument.log_every=1000");
  if (job.budget_bytes > 0) argv.push_back("memory.limit=" + std::to_string(job.budget_bytes));
  if (!job.profile_path.empty()) argv.push_back("instrument.profile=" + job.profile_path);
  argv.insert(argv.end(), {"--out", dir.string()});

  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  const fs::path log = dir / "log.txt";
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot write " + log.string());
  Measured m;
  m.dir = dir;
  m.command = shell_command(argv);
  ProcessSpec spec{.argv = argv, .stdout_fd = fd, .stderr_fd = fd};
  spec.default_signals = true;
  m.exit_code = run_process(spec).exit_code;
  ::close(fd);

  const fs::path result = dir / "result.json";
  if (!fs::exists(result)) {
    m.status = "failed";
    return m;
  }
  const analysis::RunResult r = analysis::load_run(dir);
  if (r.oom) {
    m.status = "oom";
    m.peak_bytes = r.oom->in_use_bytes + r.oom->requested_bytes;
    m.oom_message = r.oom->message;
    return m;
  }
  m.status = m.exit_code == 0 ? "completed" : "failed";
  m.step_ms_median = r.step_ms_median;
  m.peak_bytes = analysis::largest_rank_device_side_peak(r);  // what memory.limit caps
  return m;
}

}  // namespace dtlab::cli
