// gloo_backend.hpp: creates c10d's Gloo backend without exposing gloo headers to the rest of dtlab.
//
// The torch wheel does not ship gloo/*.h, so ProcessGroupGloo.hpp is compiled against Debian's
// libgloo-dev headers in exactly one translation unit (gloo_backend.cpp). Nothing else may include it.
#pragma once

#include <chrono>
#include <string>

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

namespace dtlab::comm {

// Connects a full mesh of `world_size` Gloo peers through `store` (blocking until all joined or
// `timeout` passes). `hostname` is the local address peers connect to (127.0.0.1 for one machine).
// `threads` = Gloo worker threads (1 on small machines: ranks already oversubscribe the cores).
c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int world_size, std::chrono::milliseconds timeout,
                                                    const std::string& hostname, int threads = 1);

}  // namespace dtlab::comm
