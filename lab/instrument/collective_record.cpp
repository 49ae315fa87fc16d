// collective_record.cpp: nccl-tests' bus-bandwidth factor per op (collective_record.hpp).
#include "lab/instrument/collective_record.hpp"

#include <algorithm>

namespace dtlab {

double busbw_factor(const std::string& op, int group_size) {
  const double n = static_cast<double>(std::max(1, group_size));
  if (op == "all_reduce") return 2.0 * (n - 1.0) / n;
  if (op == "all_gather" || op == "reduce_scatter" || op == "all_to_all" || op == "all_gather_dim1" ||
      op == "reduce_scatter_dim1")
    return (n - 1.0) / n;
  if (op == "broadcast" || op == "send" || op == "recv" || op == "send_recv") return 1.0;
  return 0.0;
}

}  // namespace dtlab
