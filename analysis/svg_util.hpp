// svg_util.hpp: small helpers of the SVG figures the report draws itself (the timelines, the pipeline grid).
#pragma once

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

namespace dtlab::analysis {

// A coordinate with one decimal: enough for a screen, short in a file of thousands of rectangles.
inline std::string fmt_svg(double v) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(1);
  s << v;
  return s.str();
}

// 1, 2 or 5 times a power of ten, giving about `target` intervals over `range` (an axis's tick step).
inline double nice_step(double range, int target) {
  const double raw = range / std::max(1, target);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

}  // namespace dtlab::analysis
