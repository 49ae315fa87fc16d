// main.cpp: an outside program on the installed dtlab package: loads a run dtlab wrote, rebuilds its config and
// checks the torch-free models against what the run measured on the real LibTorch model.
//   consumer RUN_DIR      (RUN_DIR holds result.json of a fp32 run)
// One line per check, ✓ or ✗; exits 1 on the first broken one.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "analysis/cost/predict.hpp"  // defines: predict
#include "analysis/cost/profile.hpp"  // defines: load_profile (the profiles installed under share/dtlab)
#include "analysis/results.hpp"       // defines: load_run
#include "lab/config.hpp"             // defines: from_json
#include "lab/model_shape.hpp"        // defines: model_counts
#include "strategies/catalog.hpp"     // defines: find_strategy_spec

namespace {

std::string fixed0(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", x);
  return buf;
}

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "✓" : "✗", what.c_str());
  if (!ok) std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer RUN_DIR\n");
    return 2;
  }
  const dtlab::analysis::RunResult run = dtlab::analysis::load_run(argv[1]);
  check(run.param_dtype() == "fp32", run.dir + ": param dtype " + run.param_dtype() + " (want fp32)");
  check(dtlab::find_strategy_spec(run.strategy) != nullptr, "strategy '" + run.strategy + "' is in the catalogue");

  const dtlab::Config config = dtlab::from_json(run.config, run.world_size);
  const dtlab::ModelCounts counts = dtlab::model_counts(config.model);
  check(counts.params == run.params,
        "params: model_counts " + std::to_string(counts.params) + " == measured " + std::to_string(run.params));

  const dtlab::analysis::MachineProfile profile =
      dtlab::analysis::load_profile(std::string(DTLAB_DATA_DIR) + "/analysis/profiles/h100_sxm.json");
  const nlohmann::json prediction = dtlab::analysis::predict(config, &profile);
  const double predicted_bytes = prediction["memory_bytes"]["params"].get<double>();
  const double measured_bytes = run.memory ? run.memory->params : -1;
  check(predicted_bytes == measured_bytes && predicted_bytes == 4.0 * counts.params,
        "param bytes: predicted " + fixed0(predicted_bytes) + " == measured " + fixed0(measured_bytes));
  check(prediction["step_ms"].is_number() && prediction["step_ms"].get<double>() > 0,
        "predicted step on h100_sxm: " + prediction["step_ms"].dump() + " ms");
  return 0;
}
