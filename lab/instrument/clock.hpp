// clock.hpp: the lab clock — microseconds on the steady clock since the process's first reading.
//
// Every timestamp of the instrumentation layer (phase spans, collective records, trace events) uses this
// clock, so intervals from different sources can be intersected. lab_clock_epoch_unix_ns() is the wall-clock
// time of the clock's zero (traces record it as baseTimeNanoseconds so ranks can be aligned).
#pragma once

#include <chrono>
#include <cstdint>

namespace dtlab {

namespace detail {
struct LabClockEpoch {
  std::chrono::steady_clock::time_point steady = std::chrono::steady_clock::now();
  int64_t unix_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
};
inline const LabClockEpoch& lab_clock_epoch() {
  static const LabClockEpoch epoch;  // one per process (inline function: one static across translation units)
  return epoch;
}
}  // namespace detail

inline double lab_clock_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - detail::lab_clock_epoch().steady)
      .count();
}

inline int64_t lab_clock_epoch_unix_ns() { return detail::lab_clock_epoch().unix_ns; }

}  // namespace dtlab
