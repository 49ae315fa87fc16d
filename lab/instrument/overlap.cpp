// overlap.cpp: interval union, subtraction and coverage (see overlap.hpp).
#include "lab/instrument/overlap.hpp"

#include <algorithm>

namespace dtlab {

std::vector<Interval> merge(std::vector<Interval> intervals) {
  std::erase_if(intervals, [](const Interval& i) { return i.end <= i.start; });
  std::sort(intervals.begin(), intervals.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  std::vector<Interval> out;
  for (const Interval& i : intervals) {
    if (!out.empty() && i.start <= out.back().end) {
      out.back().end = std::max(out.back().end, i.end);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

double total_length(const std::vector<Interval>& merged) {
  double sum = 0;
  for (const Interval& i : merged) sum += i.length();
  return sum;
}

double covered_length(const Interval& x, const std::vector<Interval>& merged) {
  double sum = 0;
  for (const Interval& i : merged) {
    if (i.start >= x.end) break;
    sum += Interval{std::max(x.start, i.start), std::min(x.end, i.end)}.length();
  }
  return sum;
}

std::vector<Interval> subtract(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> out;
  size_t j = 0;
  for (const Interval& i : a) {
    double cursor = i.start;
    while (j < b.size() && b[j].end <= cursor) ++j;  // cuts entirely before this piece
    for (size_t k = j; k < b.size() && b[k].start < i.end; ++k) {
      if (b[k].start > cursor) out.push_back({cursor, b[k].start});
      cursor = std::max(cursor, b[k].end);
    }
    if (cursor < i.end) out.push_back({cursor, i.end});
  }
  return out;
}

OverlapSplit split_overlap(const std::vector<Interval>& comm, const std::vector<Interval>& compute) {
  OverlapSplit s;
  for (const Interval& c : merge(comm)) {
    s.comm_us += c.length();
    s.overlapped_us += covered_length(c, compute);
  }
  s.exposed_us = s.comm_us - s.overlapped_us;
  return s;
}

}  // namespace dtlab
