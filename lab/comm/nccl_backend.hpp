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

// The backend that `auto` means, for training (parallel.backend=auto) and comm-bench (--backend auto) alike: NCCL
// when this build has it, the buffers are on GPUs, every local rank has a GPU of its own (NCCL refuses two ranks on
// one device) and there is more than one rank; else Gloo.
const char* auto_backend(bool gpu_buffers, int gpus_visible, int local_world_size, int world_size);

// One GPU per rank: binds the backend to cuda:local_rank. Throws std::runtime_error in cpu builds.
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int world_size, std::chrono::milliseconds timeout, int local_rank);

}  // namespace dtlab::comm
