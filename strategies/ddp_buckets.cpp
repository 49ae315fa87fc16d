// ddp_buckets.cpp: reverse-order bucket assignment (see ddp_buckets.hpp).
#include "strategies/ddp_buckets.hpp"

#include <algorithm>
#include <cstddef>

namespace dtlab {

BucketLayout assign_buckets(const std::vector<int64_t>& param_bytes, int64_t cap_bytes, int64_t first_cap_bytes) {
  BucketLayout layout;
  std::vector<int> current;
  int64_t current_bytes = 0;
  for (int i = static_cast<int>(param_bytes.size()) - 1; i >= 0; --i) {
    // The first bucket's cap never exceeds the general cap (a small cap must mean small buckets).
    const int64_t first_cap = cap_bytes > 0 ? std::min(first_cap_bytes, cap_bytes) : first_cap_bytes;
    const int64_t cap = layout.buckets.empty() ? first_cap : cap_bytes;
    const int64_t bytes = param_bytes[static_cast<size_t>(i)];
    if (!current.empty() && cap > 0 && current_bytes + bytes > cap) {
      layout.buckets.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(i);
    current_bytes += bytes;
  }
  if (!current.empty()) layout.buckets.push_back(std::move(current));
  return layout;
}

}  // namespace dtlab
