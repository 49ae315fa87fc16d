// sharding.cpp: scenario_sharding — every strategy on the `small` preset at world 2 (one thread per
// rank), the same data and optimizer; plus activation checkpointing, CPU offload and bf16 variants of
// FULL_SHARD, and world 4 runs (oversubscribed on this 2-core machine, marked). The report shows
// tokens/s, per-rank memory by category and the bytes each rank communicates per step.
#include "scenarios/runner.hpp"

int main(int argc, char** argv) {
  dtlab::Scenario s;
  s.name = "sharding";
  s.title = "Sharding strategies (small preset, world 2)";
  s.description =
      "DDP, the FSDP family and ZeRO-1 train the same model on the same batches. Losses must overlap; what differs "
      "is memory per rank (parameters, gradients and optimizer state sharded or not, plus gathered buffers) and "
      "bytes moved per step (FULL_SHARD gathers parameters twice: about 1.5x DDP's volume).";
  s.notes = {
      "Two ranks, one thread each, on a 2-core machine; Gloo moves every byte over loopback TCP.",
      "Offload on a CPU-only machine copies between two host buffers: it shows the logic and the memory split, its "
      "timing means nothing without a GPU.",
      "full_shard_bf16 halves the bytes gathered and reduce-scattered and the gathered buffers. Whether bf16 also "
      "saves time depends on the CPU: without AVX-512 BF16 its matrix multiplies are slow; with it (as on the "
      "machine these figures came from) they can be faster than fp32. The step time is measured, not assumed.",
      "World 4 runs put 4 ranks on 2 cores (oversubscribed): their throughput says little about 4-way scaling.",
  };
  s.needs_corpus = true;
  const std::vector<std::string> quick = {"train.steps=3", "train.warmup_steps=1", "model.preset=tiny",
                                          "instrument.warmup_steps=1"};
  auto run = [&](std::string name, std::vector<std::string> overrides, int world, std::string note = "") {
    overrides.push_back("train.micro_batch=" + std::to_string(8 / world));  // no accumulation
    return dtlab::ScenarioRun{std::move(name), "sharding.yaml", std::move(overrides), quick, world, std::move(note)};
  };
  s.runs = {
      run("ddp", {"parallel.strategy=ddp"}, 2),
      run("fsdp_no_shard", {"parallel.strategy=fsdp_no_shard"}, 2),
      run("zero1", {"parallel.strategy=zero1"}, 2),
      run("fsdp_shard_grad_op", {"parallel.strategy=fsdp_shard_grad_op"}, 2),
      run("fsdp_full_shard", {"parallel.strategy=fsdp_full_shard"}, 2),
      run("full_shard_no_prefetch", {"parallel.strategy=fsdp_full_shard", "parallel.prefetch=false"}, 2),
      run("full_shard_ac_full", {"parallel.strategy=fsdp_full_shard", "parallel.activation_checkpointing=full"}, 2),
      run("full_shard_offload", {"parallel.strategy=fsdp_full_shard", "parallel.offload=true"}, 2),
      run("full_shard_bf16",
          {"parallel.strategy=fsdp_full_shard", "precision.param_dtype=bf16", "precision.reduce_dtype=bf16"}, 2),
      run("full_shard_w4", {"parallel.strategy=fsdp_full_shard"}, 4, "oversubscribed: 4 ranks on 2 cores"),
      run("hybrid_2x2_w4", {"parallel.strategy=fsdp_hybrid", "parallel.shard_size=2"}, 4,
          "oversubscribed: 4 ranks on 2 cores"),
  };
  return dtlab::run_scenario(s, argc, argv);
}
