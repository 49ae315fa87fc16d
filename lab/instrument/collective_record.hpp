// collective_record.hpp: what lab/comm records of each collective and point-to-point call, and nccl-tests' bus
// bandwidth factor — torch-free, so the step analysis (step_analysis.hpp) reads the records without including comm.
#pragma once

#include <cstdint>
#include <string>

namespace dtlab {

struct CollectiveRecord {
  int64_t seq = 0;        // per Comm, from 0
  std::string op;         // all_reduce | broadcast | all_gather | reduce_scatter | send | recv | send_recv | barrier
  std::string algorithm;  // backend | ring
  std::string dtype;      // float32 | bfloat16 | float16 | ...
  int64_t bytes = 0;
  int group_size = 1;
  std::string group;  // "world", "shard.0", ...
  std::string level;  // which links it crosses: "world" (every rank, flat), "intra" (one node), "inter" (across nodes)
  std::string tag;    // caller's label, e.g. "ddp.bucket.3"
  double start_us = 0;
  double end_us = 0;  // 0 until completed
};

// nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md): busbw = algbw * factor. all_reduce 2(n-1)/n;
// all_gather, reduce_scatter, all_to_all and their dim-wise forms (n-1)/n; broadcast and point-to-point 1; anything
// else (barrier) 0.
double busbw_factor(const std::string& op, int group_size);

}  // namespace dtlab
