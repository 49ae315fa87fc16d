// replica_check.hpp: are replicated parameters identical on every rank? (RELIABILITY A2)
//
// Each rank hashes every parameter's bytes; the hashes are all-gathered, so every rank sees the same
// table and every rank fails in the same call, naming the first differing rank and parameter — no
// rank is left waiting for one that gave up.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

namespace dtlab {

class Comm;

struct ReplicaMismatch : std::runtime_error {
  using std::runtime_error::runtime_error;
};

uint64_t tensor_hash(const at::Tensor& t);  // FNV-1a over the contiguous bytes

// Collective. Throws ReplicaMismatch on every rank if any rank's tensors differ from rank 0's.
void check_replicas_identical(Comm& comm, const std::vector<std::pair<std::string, at::Tensor>>& named,
                              const std::string& when);

}  // namespace dtlab
