// replica_check.cpp: cross-rank parameter identity via all-gathered hashes (see replica_check.hpp).
#include "lab/dist/replica_check.hpp"

#include <cstdio>

#include "lab/comm/comm.hpp"

namespace dtlab {

uint64_t tensor_hash(const at::Tensor& t) {
  at::Tensor c = t.detach().contiguous();
  const auto* bytes = static_cast<const uint8_t*>(c.data_ptr());
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < c.nbytes(); ++i) h = (h ^ bytes[i]) * 1099511628211ULL;
  return h;
}

void check_replicas_identical(Comm& comm, const std::vector<std::pair<std::string, at::Tensor>>& named,
                              const std::string& when) {
  const int64_t n = static_cast<int64_t>(named.size());
  at::Tensor mine = at::empty({n}, at::kLong);
  for (int64_t i = 0; i < n; ++i)
    mine[i] = static_cast<int64_t>(tensor_hash(named[static_cast<size_t>(i)].second) >> 1);  // fits int64
  at::Tensor all = at::empty({n * comm.size()}, at::kLong);
  comm.all_gather(all, mine, CommAlgorithm::backend, "replica_check").wait();
  at::Tensor table = all.view({comm.size(), n});
  for (int r = 1; r < comm.size(); ++r)
    for (int64_t i = 0; i < n; ++i)
      if (table[r][i].item<int64_t>() != table[0][i].item<int64_t>()) {
        char hashes[80];
        std::snprintf(hashes, sizeof hashes, "%016llx vs %016llx",
                      static_cast<unsigned long long>(table[r][i].item<int64_t>()),
                      static_cast<unsigned long long>(table[0][i].item<int64_t>()));
        throw ReplicaMismatch("replica check " + when + ": parameter '" + named[static_cast<size_t>(i)].first +
                              "' on rank " + std::to_string(r) + " differs from rank 0 (hash " + hashes +
                              "); replicas must stay identical");
      }
}

}  // namespace dtlab
