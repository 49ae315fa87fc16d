// calibrate_children.hpp: how `dtlab calibrate` runs its child processes (comm-bench, the companions, the overlap
// run) and reads what they write; shared by lab/tools/calibrate*.cpp, not part of the calibrate interface.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/tools/calibrate.hpp"

namespace dtlab::calibrate_children {

// Starts argv (argv[0] = program path) with inherited stdout/stderr; returns its pid. Throws std::runtime_error
// "calibrate: ..." when it cannot start.
pid_t start_child(const std::vector<std::string>& args);
// Waits for a child; returns its exit status (128 + signal if killed).
int wait_child(pid_t pid);
// Both: the child's exit status.
int run_child(const std::vector<std::string>& args);
// This executable's path (children run the same dtlab).
std::string self_exe();
// The JSON document a child wrote at `path`. Throws std::runtime_error "calibrate: <missing> <path>" when there is
// none, or naming the path when it is not JSON.
nlohmann::json read_json_file(const std::string& path, const std::string& missing);
// argv as one line for messages.
std::string join(const std::vector<std::string>& parts);
// The overrides calibrate loads its config with: the user's, on `small` with micro-batch 4 when no config is
// given, and synthetic tokens (timing does not depend on them; no data file needed).
std::vector<std::string> calibration_overrides(const CalibrateOptions& options);

}  // namespace dtlab::calibrate_children
