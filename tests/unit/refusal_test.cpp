// refusal_test.cpp: every combination the README says is refused is refused, by a message that names both settings
// (a strategy that cannot honour part of the config fails in wrap(), before it communicates).
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "lab/config.hpp"
#include "lab/dist/mesh_comms.hpp"
#include "lab/model.hpp"
#include "lab/world.hpp"
#include "strategies/catalog.hpp"
#include "strategies/registry.hpp"

namespace dtlab {
namespace {

struct Refusal {
  std::string label;
  std::vector<std::string> overrides;
  int world = 2;                   // the world the config is validated for
  std::vector<std::string> named;  // each must appear in the message
};

void PrintTo(const Refusal& r, std::ostream* os) { *os << r.label; }

// A world of `size` ranks that never communicates: every refusal must come before the first collective.
class SilentWorld final : public World {
 public:
  explicit SilentWorld(int size) { world_size_ = local_world_size_ = size; }
  double all_reduce_sum(double value) override { return value; }
  double all_reduce_max(double value) override { return value; }
  Comm& comm() override { throw std::logic_error("the refusal came after a collective"); }
  std::shared_ptr<Comm> split(const std::string&, const std::vector<std::vector<int>>&) override {
    comm();
    return {};
  }
  std::vector<Comm*> all_comms() override { return {}; }
};

class Refused : public ::testing::TestWithParam<Refusal> {};

TEST_P(Refused, TheMessageNamesBothSettings) {
  const Refusal& r = GetParam();
  std::vector<std::string> overrides = {"model.preset=tiny", "train.global_batch=8", "train.micro_batch=4"};
  overrides.insert(overrides.end(), r.overrides.begin(), r.overrides.end());
  const Config config = load_config("", overrides, r.world);
  auto strategy = make_strategy(config.parallel.strategy);
  auto model = std::make_shared<GPT>(config.model, config.train.seed);
  SilentWorld world(r.world);
  try {
    MeshComms comms(device_mesh(config), world);
    strategy->wrap(model, config, comms);
    FAIL() << r.label << ": wrap accepted the combination";
  } catch (const std::invalid_argument& e) {
    for (const auto& name : r.named) EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Readme, Refused,
    ::testing::Values(
        Refusal{"ddp_offload",
                {"parallel.strategy=ddp", "parallel.offload=true"},
                2,
                {"parallel.strategy=ddp", "parallel.offload=true"}},
        Refusal{"ddp_bf16_params",
                {"parallel.strategy=ddp", "precision.param_dtype=bf16"},
                2,
                {"parallel.strategy=ddp", "precision.param_dtype=bf16"}},
        Refusal{"single_offload",
                {"parallel.strategy=single", "parallel.offload=true"},
                1,
                {"parallel.strategy=single", "parallel.offload=true"}},
        Refusal{"single_bf16_master",
                {"parallel.strategy=single", "precision.param_dtype=bf16", "precision.master_dtype=bf16"},
                1,
                {"parallel.strategy=single", "precision.master_dtype=bf16"}},
        Refusal{"bf16_master_fp32_params",
                {"parallel.strategy=fsdp_full_shard", "precision.master_dtype=bf16"},
                2,
                {"precision.master_dtype=bf16", "precision.param_dtype=fp32"}},
        Refusal{"tied_embeddings_sharded",
                {"parallel.strategy=zero1", "model.tie_embeddings=true"},
                2,
                {"parallel.strategy=zero1", "model.tie_embeddings=true"}},
        Refusal{"hierarchical_hybrid",
                {"parallel.strategy=fsdp_hybrid", "parallel.collectives=hierarchical"},
                2,
                {"parallel.strategy=fsdp_hybrid", "parallel.collectives=hierarchical", "use flat or auto"}},
        Refusal{"hierarchical_no_shard",
                {"parallel.strategy=fsdp_no_shard", "parallel.collectives=hierarchical"},
                2,
                {"parallel.strategy=fsdp_no_shard", "parallel.collectives=hierarchical", "use flat or auto"}},
        Refusal{"hierarchical_backend_reduce_scatter",
                {"parallel.strategy=fsdp_full_shard", "parallel.collectives=hierarchical",
                 "parallel.reduce_scatter=backend"},
                2,
                {"parallel.collectives=hierarchical", "parallel.reduce_scatter=backend"}},
        Refusal{"hierarchical_one_node",  // the silent world's ranks are all on one node
                {"parallel.strategy=fsdp_full_shard", "parallel.collectives=hierarchical"},
                2,
                {"parallel.strategy=fsdp_full_shard", "parallel.collectives=hierarchical", "a job across nodes"}},
        Refusal{"single_in_a_job", {"parallel.strategy=single"}, 2, {"parallel.strategy=single", "world_size=2"}}),
    [](const auto& info) { return info.param.label; });

}  // namespace
}  // namespace dtlab
