// nccl_backend.hpp: creates c10d's NCCL backend (cuda configuration only; elsewhere it throws).
// ProcessGroupNCCL.hpp is included in nccl_backend.cpp alone.
#pragma once

#include <chrono>

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

namespace dtlab::comm {

// True in the cuda configuration, where make_nccl_backend can work; the command refuses parallel.backend=nccl
// before any rendezvous when it is false (every rank alike, exit 2).
bool nccl_built();

// One GPU per rank: binds the backend to cuda:local_rank. Throws std::runtime_error in cpu builds.
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int world_size, std::chrono::milliseconds timeout, int local_rank);

}  // namespace dtlab::comm
