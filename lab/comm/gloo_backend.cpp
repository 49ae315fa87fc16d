// gloo_backend.cpp: the only translation unit that includes ProcessGroupGloo.hpp (and thus gloo headers
// from Debian's libgloo-dev). It returns the backend as a plain c10d::Backend, and calls no inline
// member that touches gloo types, so a skew between those headers and the gloo compiled into
// libtorch_cpu cannot reach the rest of the program.
#include "lab/comm/gloo_backend.hpp"

#ifndef USE_C10D_GLOO
#error "USE_C10D_GLOO must be defined (cmake/DtlabTorch.cmake sets it) or ProcessGroupGloo.hpp is empty"
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

namespace dtlab::comm {

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int world_size, std::chrono::milliseconds timeout,
                                                    const std::string& hostname, int threads) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(hostname));
  options->threads = threads;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options);
}

}  // namespace dtlab::comm
