// mesh_rank.cpp: one rank of a `dtlab launch -n N build/bin/mesh_rank DIMS` job that checks the mesh's communicators
// (lab/dist/mesh_comms.hpp) on real processes (driven by dist_tests).
//
// DIMS: the mesh's degrees, e.g. "dp_replicate=2,dp_shard=2" or "pp=2,tp=2" (unnamed degrees are 1; the product
// must be the world size). For every dimension set MeshComms builds (each dimension, and dp flattened):
//   * the communicator's size and this rank's place in it are the mesh's (DeviceMesh::group_of, index_in_group);
//   * an all-reduce of a one-hot vector of world ranks over it marks exactly the ranks of this rank's mesh group:
//     the communicator really joins the ranks the mesh says, not only the right number of them;
//   * a group that holds the whole world is the world's own communicator (no second one over the same ranks).
// Then the number of communicators this rank holds is the world's plus one per dimension group of 2 or more ranks
// short of the world (groups of one are made when first asked, and the checks above asked for each).
// Every rank issues the same collectives whatever its results; failures are summed and every rank exits 1 if any.
// Output: "ok"/"FAIL" lines, then "mesh_rank: all checks passed" (exit 0).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "lab/comm/comm.hpp"
#include "lab/dist/dist_world.hpp"
#include "lab/dist/mesh_comms.hpp"
#include "lab/dist/rank_env.hpp"
#include "lab/mesh.hpp"

namespace {

using dtlab::MeshDim;

dtlab::ParallelDims parse_dims(const std::string& text) {
  dtlab::ParallelDims dims;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto eq = item.find('=');
    const auto dim = dtlab::parse_mesh_dim(item.substr(0, eq));
    if (eq == std::string::npos || !dim) throw std::invalid_argument("mesh_rank: bad degree '" + item + "'");
    const int64_t degree = std::stoll(item.substr(eq + 1));
    switch (*dim) {
      case MeshDim::pp:
        dims.pp = degree;
        break;
      case MeshDim::dp_replicate:
        dims.dp_replicate = degree;
        break;
      case MeshDim::dp_shard:
        dims.dp_shard = degree;
        break;
      case MeshDim::cp:
        dims.cp = degree;
        break;
      case MeshDim::tp:
        dims.tp = degree;
        break;
    }
  }
  return dims;
}

std::string join(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : " ") + std::to_string(r);
  return "{" + out + "}";
}

int run(const std::string& dims_text) {
  const dtlab::RankEnv env = dtlab::discover_rank_env({}, dtlab::current_environment());
  dtlab::RendezvousOptions options;
  options.timeout = std::chrono::seconds(20);
  dtlab::DistWorld world(env, options);
  const int rank = world.rank(), size = world.world_size();
  const dtlab::DeviceMesh mesh(parse_dims(dims_text), size);
  dtlab::MeshComms comms(mesh, world);
  int failures = 0;
  auto verdict = [&](bool ok, const std::string& what) {
    if (!ok) ++failures;
    std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  };
  int expected_comms = 1;  // the world's
  for (const std::vector<MeshDim>& dims : dtlab::MeshComms::built_dim_sets()) {
    const std::string name = dtlab::MeshComms::group_name(dims);
    const std::vector<int> group = mesh.group_of(rank, dims);
    const int group_size = static_cast<int>(group.size());
    if (group_size > 1 && group_size < size) ++expected_comms;
    dtlab::Comm& comm = comms.comm(dims);
    verdict(comm.size() == group_size && comms.size_of(dims) == group_size,
            name + ": size " + std::to_string(comm.size()) + " is the mesh group's " + std::to_string(group_size));
    verdict(
        comm.rank() == mesh.index_in_group(rank, dims) && comms.index_in(dims) == comm.rank(),
        name + ": rank " + std::to_string(rank) + " is place " + std::to_string(comm.rank()) + " of " + join(group));
    verdict((group_size == size) == (&comm == &world.comm()),
            name + ": the world's communicator exactly when the group is the world");
    at::Tensor marks = at::zeros({size}, at::kFloat);
    marks[rank] = 1.0f;
    comm.all_reduce(marks, "test.mesh." + name).wait();
    std::vector<int> joined;
    for (int r = 0; r < size; ++r)
      if (marks[r].item<float>() != 0.0f) joined.push_back(r);
    verdict(joined == group, name + ": the all-reduce joins " + join(joined) + ", the mesh group is " + join(group));
  }
  const int held = static_cast<int>(world.all_comms().size());
  // Groups of one were made when asked for above: one more each.
  int singletons = 0;
  for (const std::vector<MeshDim>& dims : dtlab::MeshComms::built_dim_sets())
    if (mesh.group_of(rank, dims).size() == 1 && size > 1) ++singletons;
  verdict(held == expected_comms + singletons, "communicators held: " + std::to_string(held) + " (world + " +
                                                   std::to_string(expected_comms - 1) + " splits + " +
                                                   std::to_string(singletons) + " groups of one)");
  at::Tensor total = at::full({1}, static_cast<double>(failures), at::kDouble);
  world.comm().all_reduce(total, "test.mesh.failures").wait();
  if (total.item<double>() > 0) return 1;
  std::printf("mesh_rank: all checks passed\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: mesh_rank DIMS (e.g. dp_replicate=2,dp_shard=2; under dtlab launch -n N)\n");
    return 2;
  }
  try {
    return run(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mesh_rank: error: %s\n", e.what());
    return 1;
  }
}
