// desync_unit_test.cpp: the desync check's signatures in-process (lab/comm/desync_check.hpp): what they describe,
// that every field takes part in the comparison, the message every rank raises, and the bytes the store carries.
// The check over real processes is in dist_test.cpp (desync_rank) and tests/strategy/desync_test.cpp (training).
#include <gtest/gtest.h>

#include <c10/core/ScalarType.h>

#include <ostream>

#include "lab/comm/desync_check.hpp"

namespace dtlab {

// gtest prints a signature as its description, not its bytes.
void PrintTo(const CollectiveSignature& s, std::ostream* os) { *os << describe(s); }

namespace {

constexpr auto kFloat = static_cast<int64_t>(c10::ScalarType::Float);
constexpr auto kBFloat16 = static_cast<int64_t>(c10::ScalarType::BFloat16);

CollectiveSignature all_reduce(int64_t seq, std::vector<int64_t> sizes, const std::string& tag,
                               int64_t dtype = kFloat) {
  return make_signature(seq, CollectiveStream::backend, CollectiveOp::all_reduce, dtype, sizes, -1, -1, tag);
}

TEST(DesyncSignature, DescribesOpReduceDtypeShapeRootOutputAndTag) {
  EXPECT_EQ(describe(all_reduce(3, {1024}, "ddp.bucket.0")), "all_reduce sum float32[1024] 'ddp.bucket.0'");
  EXPECT_EQ(describe(make_signature(0, CollectiveStream::backend, CollectiveOp::broadcast, kFloat, {3, 4}, -1, 0, "b")),
            "broadcast root 0 float32[3,4] 'b'");
  EXPECT_EQ(describe(make_signature(0, CollectiveStream::ring, CollectiveOp::reduce_scatter, kBFloat16, {10}, 5, -1,
                                    "fsdp.grads.u0")),
            "reduce_scatter sum bfloat16[10] -> 5 'fsdp.grads.u0' (ring)");
  EXPECT_EQ(describe(make_signature(7, CollectiveStream::backend, CollectiveOp::barrier, -1, {}, -1, -1, "")),
            "barrier");
  EXPECT_EQ(call_name(37, CollectiveStream::backend), "call #37");
  EXPECT_EQ(call_name(2, CollectiveStream::ring), "ring call #2");
}

TEST(DesyncSignature, AgreeingRanksRaiseNothing) {
  EXPECT_EQ(find_desync("world", {all_reduce(5, {1024}, "a"), all_reduce(5, {1024}, "a")}), std::nullopt);
  EXPECT_EQ(find_desync("world", {all_reduce(5, {1024}, "a")}), std::nullopt);
}

// Each field on its own makes a desync: the op, the shape (same numel, other dims too), the dtype, the output, the
// root, the tag, the call number.
TEST(DesyncSignature, EveryFieldTakesPartInTheComparison) {
  const CollectiveSignature base = all_reduce(5, {32, 32}, "a");
  std::vector<CollectiveSignature> differing = {
      make_signature(5, CollectiveStream::backend, CollectiveOp::broadcast, kFloat, {32, 32}, -1, -1, "a"),
      all_reduce(5, {32, 33}, "a"),
      all_reduce(5, {1024}, "a"),
      all_reduce(5, {32, 32}, "a", kBFloat16),
      make_signature(5, CollectiveStream::backend, CollectiveOp::all_reduce, kFloat, {32, 32}, 2048, -1, "a"),
      make_signature(5, CollectiveStream::backend, CollectiveOp::all_reduce, kFloat, {32, 32}, -1, 1, "a"),
      all_reduce(5, {32, 32}, "b"),
      all_reduce(6, {32, 32}, "a"),
  };
  for (const CollectiveSignature& other : differing) {
    EXPECT_NE(base, other) << describe(other);
    EXPECT_NE(find_desync("g", {base, other}), std::nullopt) << describe(other);
  }
}

TEST(DesyncSignature, TheMessageNamesGroupCallRanksAndBothSignatures) {
  const auto two = find_desync(
      "dp", {all_reduce(37, {1024}, "x"),
             make_signature(37, CollectiveStream::backend, CollectiveOp::all_gather, kFloat, {512}, 1024, -1, "y")});
  ASSERT_TRUE(two.has_value());
  EXPECT_EQ(*two,
            "collective desync on group 'dp' (2 ranks) at call #37: rank 0 all_reduce sum float32[1024] 'x' vs rank 1 "
            "all_gather float32[512] -> 1024 'y' (a rank that skipped a collective shows its next one here)");
  // The most common signature first with all its ranks; then each other one with its ranks.
  const auto four = find_desync(
      "world", {all_reduce(2, {8}, "x"), all_reduce(2, {9}, "x"), all_reduce(2, {8}, "x"), all_reduce(2, {8}, "z")});
  ASSERT_TRUE(four.has_value());
  EXPECT_EQ(*four,
            "collective desync on group 'world' (4 ranks) at call #2: ranks 0, 2 all_reduce sum float32[8] 'x' vs rank "
            "1 all_reduce sum float32[9] 'x' vs rank 3 all_reduce sum float32[8] 'z' (a rank that skipped a collective "
            "shows its next one here)");
}

TEST(DesyncSignature, BytesRoundTripAndBadBytesAreRefused) {
  const CollectiveSignature s =
      make_signature(11, CollectiveStream::ring, CollectiveOp::all_gather, kFloat, {4}, 16, -1, "fsdp.params.u3");
  EXPECT_EQ(decode(encode(s)), s);
  // Past kMaxDims the trailing dims fold into the last slot; numel still counts them all.
  const CollectiveSignature deep = all_reduce(0, {2, 2, 2, 2, 2, 2, 2, 2, 3}, "");
  EXPECT_EQ(deep.numel, 768);
  EXPECT_EQ(deep.dims[CollectiveSignature::kMaxDims - 1], 6);
  EXPECT_EQ(decode(encode(deep)), deep);
  std::vector<uint8_t> bytes = encode(s);
  bytes.pop_back();
  EXPECT_THROW(decode(bytes), CollectiveDesyncError);
  EXPECT_THROW(decode({1, 2, 3}), CollectiveDesyncError);
}

}  // namespace
}  // namespace dtlab
