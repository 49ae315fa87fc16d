// rank_launch.hpp: `dtlab launch -n W <rank program> ARGS...` with both programs from this build's bin/
// (DTLAB_BINARY_DIR), for the drivers of the rank programs (parity_test.cpp, precision_test.cpp).
#pragma once

#include <string>
#include <vector>

#include "tests/strategy/job.hpp"

namespace dtlab::testing {

inline const std::string kBin = std::string(DTLAB_BINARY_DIR) + "/bin/";

inline JobResult launch(int world, std::vector<std::string> rank_args, double timeout_s = 180,
                        const std::vector<std::string>& env = {}, const std::string& program = "strategy_rank") {
  std::vector<std::string> args = {kBin + "dtlab", "launch", "-n", std::to_string(world), kBin + program};
  args.insert(args.end(), rank_args.begin(), rank_args.end());
  return run_job(args, timeout_s, env);
}

}  // namespace dtlab::testing
