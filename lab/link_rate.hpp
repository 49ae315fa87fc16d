// link_rate.hpp: how the lab writes a link rate for people ("200 Mbit/s", "4 Gbit/s") — header-only and torch-free,
// so the launcher (lab/launch), the cost models' topology notes (analysis/cost) and the report say it the same way.
#pragma once

#include <cstdio>
#include <string>

namespace dtlab {

// "200 Mbit/s", "1 Gbit/s", "4.5 Gbit/s".
inline std::string describe_rate(double bits_per_s) {
  char text[48];
  if (bits_per_s >= 1e9)
    std::snprintf(text, sizeof text, "%g Gbit/s", bits_per_s / 1e9);
  else
    std::snprintf(text, sizeof text, "%g Mbit/s", bits_per_s / 1e6);
  return text;
}

}  // namespace dtlab
