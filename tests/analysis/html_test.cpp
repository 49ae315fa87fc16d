// html_test.cpp: escaping, number formatting and SVG inlining.
#include "analysis/html.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace dtlab::analysis {
namespace {

TEST(Html, EscapesEverySpecialCharacter) {
  EXPECT_EQ(html_escape("<script>alert('x') & \"y\"</script>"),
            "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;");
  EXPECT_EQ(html_escape("plain fsdp_full_shard"), "plain fsdp_full_shard");
  EXPECT_EQ(html_escape("&amp;"), "&amp;amp;");  // not idempotent on purpose: input is text, not HTML
}

TEST(Html, NumberFormatting) {
  EXPECT_EQ(fmt_grouped(9950.4), "9\u202f950");
  EXPECT_EQ(fmt_grouped(1234567.891, 1), "1\u202f234\u202f567.9");
  EXPECT_EQ(fmt_grouped(999), "999");
  EXPECT_EQ(fmt_grouped(-12345), "-12\u202f345");
  EXPECT_EQ(fmt_fixed(2.10004, 3), "2.100");
  EXPECT_EQ(fmt_fixed(std::nan(""), 2), "–");
  EXPECT_EQ(fmt_params(4849920), "4.85 M");
  EXPECT_EQ(fmt_params(150784), "150.8 k");
  EXPECT_EQ(fmt_params(1'300'000'000), "1.30 B");
  EXPECT_EQ(fmt_params(512), "512");
}

}  // namespace
}  // namespace dtlab::analysis
