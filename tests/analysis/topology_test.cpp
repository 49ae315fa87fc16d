// topology_test.cpp: a machine profile moved onto another cluster (analysis/cost/topology.hpp) — which β changes and
// by how much, which never do, the ranks per link, and bad input.
#include <gtest/gtest.h>

#include <stdexcept>

#include "analysis/cost/topology.hpp"
#include "tests/analysis/synthetic_profile.hpp"

namespace dtlab::analysis {
namespace {

using testing::distinct_comm;
using testing::synthetic;

constexpr double kWire1G = 8e-3;  // µs per byte at 1 Gbit/s

TEST(Topology, WireTimeOfAByte) {
  EXPECT_DOUBLE_EQ(wire_us_per_byte(1e9), kWire1G);
  EXPECT_DOUBLE_EQ(wire_us_per_byte(200e6), 0.04);
}

// A loopback calibration has no inter-node model: one is derived from the intra-node one, β at least the wire time,
// α and γ as measured; one link per node shared by its ranks.
TEST(Topology, WithoutAnInterNodeModelOneIsDerivedFromTheIntraNodeOne) {
  const MachineProfile p = on_topology(synthetic(), {.nodes = 2, .ranks_per_node = 4, .inter_link_bps = 1e9});
  ASSERT_TRUE(p.comm.inter_node.has_value());
  const CollectiveCost& c = p.comm.inter_node->ops.at("all_reduce/backend");
  EXPECT_DOUBLE_EQ(c.beta_us_per_byte, kWire1G) << "the wire time, above the intra-node 1e-3";
  EXPECT_DOUBLE_EQ(c.alpha_us, 100);
  EXPECT_DOUBLE_EQ(c.gamma_us_per_byte, 2e-4);
  EXPECT_EQ(p.comm.ranks_per_node, 4) << "the topology's, not the profile's 2";
  EXPECT_EQ(p.comm.ranks_per_link, 4);
  EXPECT_DOUBLE_EQ(p.comm.inter_link_bps, 1e9);
  EXPECT_DOUBLE_EQ(p.comm.intra_node.ops.at("all_reduce/backend").beta_us_per_byte, 1e-3) << "intra untouched";
  ASSERT_FALSE(p.adjustments.empty());
  EXPECT_NE(p.adjustments.front().find("inter_node derived from intra_node"), std::string::npos)
      << p.adjustments.front();
}

// The derived model's overlap_hidden: the cores are busy for the intra-node part of a call (4 MiB all_reduce at
// p = 2), the rest waits on the link. Intra: 200 + 4 194.304 + 419.4304 = 4 813.7344 us; at 1 Gbit/s β = 8e-3:
// 200 + 33 554.432 + 419.4304 = 34 173.8624 us. Hidden: 1 - 0.8 · 4 813.7344 / 34 173.8624.
TEST(Topology, ADerivedInterNodeModelHidesTheTimeItWaitsOnTheLink) {
  MachineProfile loopback = synthetic();
  EXPECT_FALSE(on_topology(loopback, {.nodes = 2, .inter_link_bps = 1e9}).comm.inter_node->overlap_hidden);
  loopback.comm.intra_node.overlap_hidden = 0.2;
  const MachineProfile p = on_topology(loopback, {.nodes = 2, .inter_link_bps = 1e9});
  ASSERT_TRUE(p.comm.inter_node->overlap_hidden.has_value());
  EXPECT_NEAR(*p.comm.inter_node->overlap_hidden, 1 - 0.8 * 4813.7344 / 34173.8624, 1e-12);
  EXPECT_DOUBLE_EQ(*p.comm.intra_node.overlap_hidden, 0.2) << "intra untouched";
  EXPECT_NE(p.adjustments.front().find("overlap_hidden 0.89"), std::string::npos) << p.adjustments.front();
  // Taken at the call the fraction was measured at: a 1 MiB line gives 200 + 1 048.576 + 104.8576 = 1 353.4336 us
  // inside the node against 200 + 8 388.608 + 104.8576 = 8 693.4656 us across the link.
  loopback.comm.intra_node.overlap_bytes = 1 << 20;
  const MachineProfile small_line = on_topology(loopback, {.nodes = 2, .inter_link_bps = 1e9});
  EXPECT_NEAR(*small_line.comm.inter_node->overlap_hidden, 1 - 0.8 * 1353.4336 / 8693.4656, 1e-12);
}

// An inter-node model measured at 1 Gbit/s scales to 200 Mbit/s (β × 5) and to 4 Gbit/s (β / 4), but not below the
// intra-node β of the same op; both size regimes alike.
TEST(Topology, AMeasuredInterNodeModelScalesWithTheRateDownToTheIntraNodeBeta) {
  MachineProfile measured = synthetic();
  measured.comm.ranks_per_link = 2;
  measured.comm.inter_link_bps = 1e9;
  measured.comm.inter_node = distinct_comm(8);  // all_reduce/backend β 8e-3 µs/B, as the wire at 1 Gbit/s
  CollectiveCost& large = measured.comm.inter_node->ops.at("all_gather/ring");
  large.large_from_bytes = 1 << 20;
  large.large_beta_us_per_byte = 8.8e-3;
  const double beta = measured.comm.inter_node->ops.at("all_reduce/backend").beta_us_per_byte;

  const MachineProfile slow = on_topology(measured, {.nodes = 2, .inter_link_bps = 200e6});
  EXPECT_DOUBLE_EQ(slow.comm.inter_node->ops.at("all_reduce/backend").beta_us_per_byte, beta * 5);
  EXPECT_DOUBLE_EQ(slow.comm.inter_node->ops.at("all_gather/ring").large_beta_us_per_byte, 8.8e-3 * 5);
  EXPECT_DOUBLE_EQ(slow.comm.inter_node->ops.at("all_reduce/backend").alpha_us, 800);
  EXPECT_DOUBLE_EQ(slow.comm.inter_node->ops.at("all_reduce/backend").gamma_us_per_byte, 1.6e-3);
  EXPECT_EQ(slow.comm.ranks_per_link, 2) << "the profile's, it has an inter-node model";

  const MachineProfile fast = on_topology(measured, {.nodes = 2, .inter_link_bps = 4e9});
  EXPECT_DOUBLE_EQ(fast.comm.inter_node->ops.at("all_reduce/backend").beta_us_per_byte, beta / 4);
  const MachineProfile very_fast = on_topology(measured, {.nodes = 2, .inter_link_bps = 1e12});
  EXPECT_DOUBLE_EQ(very_fast.comm.inter_node->ops.at("all_reduce/backend").beta_us_per_byte, 1e-3)
      << "never below what the same op costs inside a node";
}

// A quick fit on a busy machine can leave an inter-node β near 0 (the per-call term took the time). Scaled to another
// rate it must still cost at least the wire time there, or every link rate predicts the same time; floor_betas does
// the same to a fresh fit at the rate it was measured.
TEST(Topology, AnInterNodeBetaNeverFallsBelowTheWireTime) {
  MachineProfile measured = synthetic();
  measured.comm.inter_link_bps = 1e9;
  measured.comm.inter_node = distinct_comm(8);
  CollectiveCost& flat = measured.comm.inter_node->ops.at("all_reduce/backend");
  flat.beta_us_per_byte = 0;
  flat.large_from_bytes = 1 << 20;
  flat.large_beta_us_per_byte = -1e-4;
  measured.comm.intra_node.ops.at("all_reduce/backend").beta_us_per_byte = 0;

  const MachineProfile slow = on_topology(measured, {.nodes = 2, .inter_link_bps = 200e6});
  EXPECT_DOUBLE_EQ(slow.comm.inter_node->ops.at("all_reduce/backend").beta_us_per_byte, 0.04);
  EXPECT_DOUBLE_EQ(slow.comm.inter_node->ops.at("all_reduce/backend").large_beta_us_per_byte, 0.04);

  CommModel fit = *measured.comm.inter_node;
  const double kept = fit.ops.at("all_gather/ring").beta_us_per_byte;
  ASSERT_GT(kept, kWire1G);
  EXPECT_EQ(floor_betas(fit, kWire1G), 2) << "both regimes of the flat all-reduce, nothing else";
  EXPECT_DOUBLE_EQ(fit.ops.at("all_reduce/backend").beta_us_per_byte, kWire1G);
  EXPECT_DOUBLE_EQ(fit.ops.at("all_reduce/backend").large_beta_us_per_byte, kWire1G);
  EXPECT_DOUBLE_EQ(fit.ops.at("all_gather/ring").beta_us_per_byte, kept);
}

// A spec sheet's inter-node model has no measured rate: its β becomes the wire time; the intra-node link, when
// given, floors the intra-node β; ranks_per_link as given.
TEST(Topology, SpecSheetLinksAndIntraNodeRates) {
  MachineProfile spec = synthetic();
  spec.kind = "spec-sheet";
  spec.comm.ranks_per_node = 8;
  spec.comm.inter_node = distinct_comm(0.02);  // all_reduce/backend β 2e-5: beats the wire
  const MachineProfile p = on_topology(spec, {.nodes = 8, .inter_link_bps = 200e9, .intra_link_bps = 1e9});
  EXPECT_DOUBLE_EQ(p.comm.inter_node->ops.at("all_reduce/backend").beta_us_per_byte, 4e-5);
  EXPECT_DOUBLE_EQ(p.comm.intra_node.ops.at("all_gather/ring").beta_us_per_byte, kWire1G);
  EXPECT_EQ(p.comm.ranks_per_node, 8);
  EXPECT_EQ(p.comm.ranks_per_link, 1);
  EXPECT_EQ(on_topology(spec, {.nodes = 8, .ranks_per_link = 4}).comm.ranks_per_link, 4);
}

TEST(Topology, NoChangeWithoutRates) {
  const MachineProfile p = on_topology(synthetic(), {});
  EXPECT_FALSE(p.comm.inter_node.has_value());
  EXPECT_EQ(p.comm.ranks_per_node, 2);
  EXPECT_TRUE(p.adjustments.empty());
}

TEST(Topology, BadInputIsRefused) {
  EXPECT_THROW(on_topology(synthetic(), {.nodes = 0}), std::invalid_argument);
  EXPECT_THROW(on_topology(synthetic(), {.nodes = 2, .inter_link_bps = -1}), std::invalid_argument);
  EXPECT_THROW(on_topology(synthetic(), {.nodes = 2, .ranks_per_link = -1}), std::invalid_argument);
}

}  // namespace
}  // namespace dtlab::analysis
