// ddp_buckets.hpp: how DDP groups gradients into buckets (torch-free; used by ddp.cpp and ddp_cost.cpp).
//
// Walk the parameters in reverse model order (the order backward produces their gradients) and fill
// buckets up to a byte cap; the first bucket has its own small cap (1 MiB by default) so the first
// all-reduce starts early in backward (never larger than the general cap). A parameter larger than the
// cap gets a bucket of its own.
#pragma once

#include <cstdint>
#include <vector>

namespace dtlab {

struct BucketLayout {
  std::vector<std::vector<int>> buckets;  // parameter indices (model order), each bucket in reverse order
};

// `param_bytes[i]`: gradient bytes of parameter i (model order). Caps in bytes; cap <= 0 = unlimited.
BucketLayout assign_buckets(const std::vector<int64_t>& param_bytes, int64_t cap_bytes, int64_t first_cap_bytes);

inline constexpr int64_t kFirstBucketCapBytes = 1 << 20;

}  // namespace dtlab
