// comm_unit_test.cpp: the pure parts of the comm layer and the rendezvous checks that need no peer —
// Comm::chunk_bounds (how a buffer splits over ranks, also when sizes do not divide), the loopback
// test that decides whether rank 0's store may bind without --bind, and DistWorld's refusal to bind a
// non-loopback MASTER_ADDR implicitly (thrown before any socket is opened).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "lab/comm/comm.hpp"
#include "lab/dist/dist_world.hpp"

namespace dtlab {
namespace {

using Bounds = std::vector<std::pair<int64_t, int64_t>>;

// The invariants every split must keep: p contiguous chunks covering [0, n) in rank order, lengths
// differing by at most one, the longer ones first.
void expect_valid_split(int64_t n, int p) {
  const Bounds b = Comm::chunk_bounds(n, p);
  ASSERT_EQ(b.size(), static_cast<size_t>(p)) << "n=" << n << " p=" << p;
  int64_t expected_begin = 0;
  for (int r = 0; r < p; ++r) {
    EXPECT_EQ(b[r].first, expected_begin) << "n=" << n << " p=" << p << " r=" << r;
    const int64_t len = b[r].second - b[r].first;
    EXPECT_EQ(len, n / p + (r < n % p ? 1 : 0)) << "n=" << n << " p=" << p << " r=" << r;
    expected_begin = b[r].second;
  }
  EXPECT_EQ(expected_begin, n) << "n=" << n << " p=" << p;
}

TEST(ChunkBounds, DivisibleSizesSplitEvenly) {
  EXPECT_EQ(Comm::chunk_bounds(8, 4), (Bounds{{0, 2}, {2, 4}, {4, 6}, {6, 8}}));
  EXPECT_EQ(Comm::chunk_bounds(5, 1), (Bounds{{0, 5}}));
}

TEST(ChunkBounds, RemainderGoesToTheFirstRanks) {
  EXPECT_EQ(Comm::chunk_bounds(10, 4), (Bounds{{0, 3}, {3, 6}, {6, 8}, {8, 10}}));
  EXPECT_EQ(Comm::chunk_bounds(7, 3), (Bounds{{0, 3}, {3, 5}, {5, 7}}));
}

TEST(ChunkBounds, FewerElementsThanRanksLeavesEmptyChunksAtTheEnd) {
  EXPECT_EQ(Comm::chunk_bounds(2, 4), (Bounds{{0, 1}, {1, 2}, {2, 2}, {2, 2}}));
  EXPECT_EQ(Comm::chunk_bounds(0, 3), (Bounds{{0, 0}, {0, 0}, {0, 0}}));
}

TEST(ChunkBounds, InvariantsOverManySizes) {
  for (int p = 1; p <= 8; ++p)
    for (int64_t n : {0, 1, 2, 3, 7, 63, 64, 65, 1000, 4097, 65539}) expect_valid_split(n, p);
}

TEST(Loopback, LoopbackAddresses) {
  EXPECT_TRUE(is_loopback_address("127.0.0.1"));
  EXPECT_TRUE(is_loopback_address("127.1.2.3"));
  EXPECT_TRUE(is_loopback_address("127.255.255.254"));
  EXPECT_TRUE(is_loopback_address("localhost"));
  EXPECT_TRUE(is_loopback_address("::1"));
}

TEST(Loopback, OtherAddressesAreNot) {
  EXPECT_FALSE(is_loopback_address("0.0.0.0"));
  EXPECT_FALSE(is_loopback_address("192.0.2.1"));
  EXPECT_FALSE(is_loopback_address("10.0.0.1"));
  EXPECT_FALSE(is_loopback_address("128.0.0.1"));
  EXPECT_FALSE(is_loopback_address("126.255.255.255"));
  EXPECT_FALSE(is_loopback_address("gpu07"));
  EXPECT_FALSE(is_loopback_address("localhost.example.org"));
  EXPECT_FALSE(is_loopback_address(""));
}

TEST(Rendezvous, NonLoopbackMasterWithoutBindIsRefusedBeforeAnySocket) {
  RankEnv env;
  env.rank = 0;
  env.world_size = 2;
  env.launcher = "cli";
  env.master_addr = "192.0.2.1";  // TEST-NET-1: never routed; the check must come first
  env.master_port = 29999;
  RendezvousOptions options;
  options.timeout = std::chrono::seconds(2);
  // NOLINTNEXTLINE(clang-analyzer-deadcode.DeadStores): read after the catch, which the analyzer does not model
  const auto start = std::chrono::steady_clock::now();
  try {
    DistWorld world(env, options);
    FAIL() << "DistWorld accepted a non-loopback MASTER_ADDR without --bind";
  } catch (const RendezvousError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("192.0.2.1"), std::string::npos) << message;
    EXPECT_NE(message.find("--bind"), std::string::npos) << message;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

}  // namespace
}  // namespace dtlab
