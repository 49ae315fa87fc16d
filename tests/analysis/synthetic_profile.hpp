// synthetic_profile.hpp: the one hand-made machine profile of the cost-model tests (step model, topology): round
// numbers, and every collective key its own α, β, γ, so that timing a collective with the wrong key, or moving the
// wrong β, changes the result the test computes by hand.
#pragma once

#include "analysis/cost/profile.hpp"

namespace dtlab::analysis::testing {

// All multiplied by `scale`:
//   all_reduce/backend 100, 1e-3, 2e-4      all_gather/backend 200, 2e-3, 7e-4     all_gather/ring 300, 3e-3, 5e-4
//   reduce_scatter/ring 400, 4e-3, 4e-4     reduce_scatter/backend 500, 5e-3, 6e-4
//   broadcast/backend 600, 6e-3, 0          send_recv/backend 700, 7e-3, 0
inline CommModel distinct_comm(double scale = 1) {
  CommModel m;
  m.backend = "gloo";
  m.ops["all_reduce/backend"] = {100 * scale, 1e-3 * scale, 2e-4 * scale};
  m.ops["all_gather/backend"] = {200 * scale, 2e-3 * scale, 7e-4 * scale};
  m.ops["all_gather/ring"] = {300 * scale, 3e-3 * scale, 5e-4 * scale};
  m.ops["reduce_scatter/ring"] = {400 * scale, 4e-3 * scale, 4e-4 * scale};
  m.ops["reduce_scatter/backend"] = {500 * scale, 5e-3 * scale, 6e-4 * scale};
  m.ops["broadcast/backend"] = {600 * scale, 6e-3 * scale, 0};
  m.ops["send_recv/backend"] = {700 * scale, 7e-3 * scale, 0};
  return m;
}

// 1 TFLOP/s fp32 at efficiency 0.5, 10 GB/s memory, two ranks per node, distinct_comm(comm_scale) inside a node and
// no inter-node model.
inline MachineProfile synthetic(double comm_scale = 1) {
  MachineProfile p;
  p.name = "synthetic";
  p.kind = "measured";
  p.source = "test";
  p.device = "cpu";
  p.compute.matmul_tflops = {{"float32", 1.0}};
  p.compute.train_efficiency = 0.5;
  p.compute.memory_GBps = 10;
  p.comm.ranks_per_node = 2;
  p.comm.intra_node = distinct_comm(comm_scale);
  return p;
}

}  // namespace dtlab::analysis::testing
