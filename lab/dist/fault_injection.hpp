// fault_injection.hpp: test-only delays at named points (RELIABILITY A6), from the environment:
//   DTLAB_INJECT_DELAY="before_all_reduce=20,before_all_gather=20,before_reduce_scatter=20,after_forward=10,before_optimizer=10"
// (milliseconds; optional "@RANK" suffix on a point limits it to one rank, e.g. "after_forward@1=50").
// Results must be bit-identical with and without delays: timing must never change the math.
#pragma once

#include <cstdint>

namespace dtlab {

// Sleeps if the environment asks for a delay at `point` on `rank`. Cheap when unset.
void inject_delay(const char* point, int rank);

// Test-only process death after an optimizer step (RELIABILITY C14), from the environment:
//   DTLAB_INJECT_FAULT="RANK:STEP:KIND", KIND = exit (exit code 1) | sigkill | sigterm | abort
void inject_fault(int64_t step, int rank);

// Test-only non-finite gradient (RELIABILITY D21): DTLAB_INJECT_INF="RANK:STEP" makes this return true
// on that rank at that step; the strategy then writes an inf into one of its gradients.
bool inject_nonfinite(int64_t step, int rank);

}  // namespace dtlab
