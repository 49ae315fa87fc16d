// overlap.hpp: interval arithmetic for "how much communication was hidden behind compute" (torch-free).
//
//   std::vector<Interval> compute = subtract(merge(busy_spans), merge(blocked_spans));
//   OverlapSplit s = split_overlap(comm_intervals, compute);   // s.overlapped_us, s.exposed_us, s.overlap_pct()
//
// A collective is overlapped for the part of its [start, end) that intersects compute on the main thread
// (forward, backward or optimizer work, not waiting); the rest is exposed. Per step, comm intervals are
// merged first so two concurrent collectives are not counted twice.
#pragma once

#include <vector>

namespace dtlab {

struct Interval {
  double start = 0, end = 0;  // [start, end); empty when end <= start
  double length() const { return end > start ? end - start : 0.0; }
};

// Sorted, disjoint union of the intervals (empty ones dropped; touching ones joined).
std::vector<Interval> merge(std::vector<Interval> intervals);
// Total length of a merged list.
double total_length(const std::vector<Interval>& merged);
// Length of `x` covered by a merged list.
double covered_length(const Interval& x, const std::vector<Interval>& merged);
// Parts of merged list `a` not covered by merged list `b` (both sorted and disjoint; result too).
std::vector<Interval> subtract(const std::vector<Interval>& a, const std::vector<Interval>& b);

struct OverlapSplit {
  double comm_us = 0;        // union of the comm intervals
  double overlapped_us = 0;  // of which covered by compute
  double exposed_us = 0;     // comm_us - overlapped_us
  // overlapped / comm in percent; 0 when there was no communication.
  double overlap_pct() const { return comm_us > 0 ? 100.0 * overlapped_us / comm_us : 0.0; }
};
// `compute` must be merged (sorted, disjoint); `comm` may overlap itself.
OverlapSplit split_overlap(const std::vector<Interval>& comm, const std::vector<Interval>& compute);

}  // namespace dtlab
