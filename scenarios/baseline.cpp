// baseline.cpp: scenario_baseline — the single-process reference run on the `small` preset over the
// license-text English corpus. Every other study compares against runs like this one.
#include "scenarios/runner.hpp"

int main(int argc, char** argv) {
  dtlab::Scenario s;
  s.name = "baseline";
  s.title = "Single-process baseline (small preset)";
  s.description =
      "One process trains the ~5M-parameter `small` GPT on a byte-level English corpus (the license texts "
      "shipped with Debian). This is the reference for every distributed strategy: same seed, same data "
      "order, same optimizer.";
  s.notes = {"CPU run: both cores serve one process (intra-op threads = 2). Timings are fp32 CPU timings.",
             "The first steps include one-time costs and are excluded from the summary (instrument.warmup_steps)."};
  s.needs_corpus = true;
  s.runs = {{"single", "baseline.yaml", {}, {"train.steps=4", "train.warmup_steps=1", "model.preset=tiny"}, 1, ""}};
  return dtlab::run_scenario(s, argc, argv);
}
