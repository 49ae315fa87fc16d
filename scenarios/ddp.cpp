// ddp.cpp: scenario_ddp — `single` vs `ddp` on the `small` preset: what data parallelism costs and
// gains on one 2-core machine. One thread per rank, so world 2 gives each rank a core; world 4 puts
// four ranks on two cores (oversubscribed, marked as such). The one-process runs are the baselines:
// one thread (for scaling efficiency per core) and two threads (the same hardware as world 2).
#include "scenarios/runner.hpp"

int main(int argc, char** argv) {
  dtlab::Scenario s;
  s.name = "ddp";
  s.title = "DDP vs one process (small preset)";
  s.description =
      "The same model, data order and optimizer trained by one process and by DDP across 2 and 4 processes "
      "(Gloo over loopback TCP, bucketed all-reduce overlapped with backward). Losses must overlap; throughput, "
      "scaling efficiency and communication wait show what distribution costs on this machine.";
  s.notes = {
      "This machine has 2 cores: ddp_w2 gives each rank one core (compare with single_1thread); ddp_w4 runs 4 ranks "
      "on 2 cores and is oversubscribed, so its throughput says little about 4-way scaling.",
      "single_2threads uses both cores in one process: the fair hardware-for-hardware comparison for ddp_w2.",
      "Gloo moves gradients over TCP even on one host (no shared memory): communication is far slower than NVLink.",
  };
  s.needs_corpus = true;
  const std::vector<std::string> quick = {"train.steps=4", "train.warmup_steps=1", "model.preset=tiny",
                                          "instrument.warmup_steps=1"};
  s.runs = {
      {"single_1thread",
       "ddp.yaml",
       {"parallel.strategy=single", "train.micro_batch=8", "train.threads=1"},
       quick,
       1,
       ""},
      {"single_2threads",
       "ddp.yaml",
       {"parallel.strategy=single", "train.micro_batch=8", "train.threads=2"},
       quick,
       1,
       ""},
      {"ddp_w2", "ddp.yaml", {"parallel.strategy=ddp", "train.micro_batch=4", "train.threads=1"}, quick, 2, ""},
      {"ddp_w4",
       "ddp.yaml",
       {"parallel.strategy=ddp", "train.micro_batch=2", "train.threads=1"},
       quick,
       4,
       "oversubscribed: 4 ranks on 2 cores"},
  };
  return dtlab::run_scenario(s, argc, argv);
}
