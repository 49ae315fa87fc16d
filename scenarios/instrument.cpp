// instrument.cpp: scenario_instrument — what instrumentation costs and shows. The same DDP and FULL_SHARD runs
// (world 2, `small`) with instrument.trace off and on, in the order off, on, on, off, so a steady drift of the
// machine's speed hits both alike; afterwards it prints the tracing overhead (median step time on vs off, target <= 2%)
// and writes it to <out>/instrument/overhead.json. The trace-on runs leave rank<r>/trace.json.gz for Perfetto.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "scenarios/runner.hpp"

namespace {

// summary.<key> of a finished run; NaN when it cannot be read.
double summary_value(const std::filesystem::path& run_dir, const char* key) {
  std::ifstream in(run_dir / "result.json");
  if (!in) return NAN;
  try {
    return nlohmann::json::parse(in).at("summary").at(key).get<double>();
  } catch (const std::exception&) {
    return NAN;
  }
}

}  // namespace

int main(int argc, char** argv) {
  dtlab::Scenario s;
  s.name = "instrument";
  s.title = "Instrumentation: phases, overlap and the cost of tracing";
  s.description =
      "DDP and FSDP FULL_SHARD on the small preset (world 2), each with tracing off and on, interleaved. The "
      "phase breakdown, the communication timeline and the overlap figures come from the lab's own timers and "
      "per-collective records; the trace-on runs also write a Perfetto/Chrome trace per rank.";
  s.notes = {
      "Tracing overhead = median step time with instrument.trace=true over the same run with it off (target <= 2%). "
      "Phase timers and collective records are always on; tracing adds the trace events and the gzip at the end.",
      "Open results/instrument/<run>/rank0/trace.json.gz in https://ui.perfetto.dev, or merge all ranks with "
      "`build/bin/dtlab trace merge results/instrument/<run> -o merged.json.gz`.",
  };
  s.needs_corpus = true;
  const std::vector<std::string> quick = {"train.steps=4", "train.warmup_steps=1", "model.preset=tiny",
                                          "instrument.warmup_steps=1"};
  for (const std::string strategy : {"ddp", "fsdp_full_shard"})
    for (const std::string round : {"a", "b"})
      for (const bool trace : round == "a" ? std::vector<bool>{false, true} : std::vector<bool>{true, false})
        s.runs.push_back({strategy + "_trace_" + (trace ? "on_" : "off_") + round,
                          "ddp.yaml",
                          {"parallel.strategy=" + strategy, "train.micro_batch=4", "train.threads=1", "train.steps=30",
                           std::string("instrument.trace=") + (trace ? "true" : "false")},
                          quick,
                          2,
                          ""});
  const int rc = dtlab::run_scenario(s, argc, argv);
  if (rc != 0) return rc;

  const std::filesystem::path dir = std::filesystem::path(dtlab::scenario_out_root(argc, argv)) / s.name;
  nlohmann::json overhead = nlohmann::json::array();
  for (const std::string strategy : {"ddp", "fsdp_full_shard"}) {
    double off = 0, on = 0, direct = 0;
    for (const std::string round : {"a", "b"}) {
      off += summary_value(dir / (strategy + "_trace_off_" + round), "step_ms_median");
      on += summary_value(dir / (strategy + "_trace_on_" + round), "step_ms_median");
      direct += summary_value(dir / (strategy + "_trace_on_" + round), "trace_overhead_pct");
    }
    if (!std::isfinite(off) || !std::isfinite(on)) continue;  // --only ran a subset
    // Two figures: the A/B difference of whole runs (includes run-to-run noise of a few %), and the direct cost
    // the trace-on runs measured in themselves (time spent writing trace events over the median step).
    const double pct = 100.0 * (on - off) / off;
    std::printf(
        "tracing overhead %-16s median step %.1f ms on vs %.1f ms off = %+.1f%%; time writing trace events = "
        "%.3f%% of a step (target <= 2%%: %s)\n",
        strategy.c_str(), on / 2, off / 2, pct, direct / 2, pct <= 2.0 ? "met" : "missed by the A/B figure");
    overhead.push_back({{"strategy", strategy},
                        {"step_ms_on", on / 2},
                        {"step_ms_off", off / 2},
                        {"overhead_pct", pct},
                        {"direct_trace_pct", direct / 2}});
  }
  std::ofstream(dir / "overhead.json") << overhead.dump(2) << "\n";
  return 0;
}
