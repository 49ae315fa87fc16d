// cluster_parity_test.cpp: every strategy on a 2-node emulated cluster (`dtlab launch --nodes 2`, network namespaces
// joined by a 1 Gbit/s shaped link; DDP, ZeRO-1, FULL_SHARD and SHARD_GRAD_OP also with their hierarchical
// collectives, whose records must all be at the intra and inter levels) against the single-process
// reference: the same check as parity_test.cpp (loss, grad norm and every parameter at every step, fp32 tolerance),
// with the ranks' traffic crossing real, shaped links between namespaces instead of loopback. Skips with the reason
// without CAP_NET_ADMIN / CAP_SYS_ADMIN.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "lab/launch/cluster.hpp"
#include "tests/strategy/job.hpp"

namespace dtlab {
namespace {

const std::string kBin = std::string(DTLAB_BINARY_DIR) + "/bin/";

struct ClusterCase {
  std::string strategy;
  int nodes, ranks_per_node, accumulation;
  std::vector<std::string> extra = {};
};

void PrintTo(const ClusterCase& c, std::ostream* os) {
  *os << c.strategy << " on " << c.nodes << " nodes x " << c.ranks_per_node << " accumulation " << c.accumulation;
  for (const std::string& setting : c.extra) *os << " " << setting;
}

std::string case_name(const ::testing::TestParamInfo<ClusterCase>& info) {
  const ClusterCase& c = info.param;
  std::string name = c.strategy + "_" + std::to_string(c.nodes) + "x" + std::to_string(c.ranks_per_node) + "_acc" +
                     std::to_string(c.accumulation);
  for (const std::string& setting : c.extra)  // "parallel.collectives=flat" -> "_flat"
    name += "_" + setting.substr(setting.find('=') + 1);
  return name;
}

class ClusterParity : public ::testing::TestWithParam<ClusterCase> {
 protected:
  void SetUp() override {
    std::string why;
    if (!can_build_clusters(&why)) GTEST_SKIP() << why;
  }
};

TEST_P(ClusterParity, LossGradNormAndEveryParameterMatchTheReferenceAtEveryStep) {
  const ClusterCase& c = GetParam();
  const int world = c.nodes * c.ranks_per_node, global = 8;
  std::vector<std::string> args = {kBin + "dtlab",
                                   "launch",
                                   "--nodes",
                                   std::to_string(c.nodes),
                                   "-n",
                                   std::to_string(c.ranks_per_node),
                                   "--inter-link",
                                   "1gbit",
                                   kBin + "strategy_rank",
                                   "parallel.strategy=" + c.strategy,
                                   "train.optimizer=adamw",
                                   "train.steps=10",
                                   "train.global_batch=" + std::to_string(global),
                                   "train.micro_batch=" + std::to_string(global / (world * c.accumulation))};
  if (c.strategy == "ddp" || c.strategy == "fsdp_no_shard") args.insert(args.begin() + 9, "--check-replicas");
  args.insert(args.end(), c.extra.begin(), c.extra.end());
  const testing::JobResult job = testing::run_job(args, 240);
  EXPECT_EQ(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("emulated cluster: " + std::to_string(c.nodes) + " nodes x " +
                            std::to_string(c.ranks_per_node) + " ranks"),
            std::string::npos)
      << job.output;
  EXPECT_NE(job.output.find("parity OK"), std::string::npos) << job.output;
  // Hierarchical runs send their gradient and parameter collectives in two levels, none flat over the world; flat
  // runs the other way round (strategy_rank counts them; DDP's initial broadcast is flat in both, not counted).
  const bool hierarchical =
      std::find(c.extra.begin(), c.extra.end(), "parallel.collectives=hierarchical") != c.extra.end();
  const std::regex levels(hierarchical ? R"(strategy collectives by level: world 0 intra [1-9]\d* inter [1-9]\d*)"
                                       : R"(strategy collectives by level: world [1-9]\d* intra 0 inter 0)");
  if (c.strategy != "fsdp_hybrid") {
    EXPECT_TRUE(std::regex_search(job.output, levels)) << job.output;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cluster, ClusterParity,
    ::testing::Values(ClusterCase{"ddp", 2, 2, 1, {"parallel.collectives=hierarchical"}},
                      ClusterCase{"ddp", 2, 2, 1, {"parallel.collectives=flat"}}, ClusterCase{"ddp", 2, 1, 2},
                      ClusterCase{"zero1", 2, 2, 1},
                      ClusterCase{"zero1", 2, 2, 2, {"parallel.collectives=hierarchical"}},
                      ClusterCase{"fsdp_full_shard", 2, 2, 1},
                      ClusterCase{"fsdp_full_shard", 2, 2, 2, {"parallel.collectives=hierarchical"}},
                      ClusterCase{"fsdp_shard_grad_op", 2, 2, 1},
                      ClusterCase{"fsdp_shard_grad_op", 2, 2, 1, {"parallel.collectives=hierarchical"}},
                      ClusterCase{"fsdp_no_shard", 2, 2, 1},
                      ClusterCase{"fsdp_hybrid", 2, 2, 1, {"parallel.shard_size=2"}},
                      ClusterCase{"fsdp_hybrid", 2, 2, 1}),
    case_name);

}  // namespace
}  // namespace dtlab
