// dtype_test.cpp: the one dtype type (lab/dtype.hpp): both spellings, sizes and the errors, torch-free.
#include "lab/dtype.hpp"

#include <gtest/gtest.h>

namespace dtlab {
namespace {

TEST(Dtype, BothSpellingsNameTheSameType) {
  EXPECT_EQ(parse_dtype("fp32"), Dtype::fp32);
  EXPECT_EQ(parse_dtype("float32"), Dtype::fp32);
  EXPECT_EQ(parse_dtype("bf16"), Dtype::bf16);
  EXPECT_EQ(parse_dtype("bfloat16"), Dtype::bf16);
  EXPECT_EQ(parse_dtype("fp16"), Dtype::fp16);
  EXPECT_EQ(parse_dtype("float16"), Dtype::fp16);
  EXPECT_EQ(parse_dtype("half"), Dtype::fp16);  // c10's second name for float16
  EXPECT_FALSE(parse_dtype("float64").has_value());
  EXPECT_FALSE(parse_dtype("FP32").has_value());  // spellings are exact, as the config's other keys
  EXPECT_FALSE(parse_dtype("").has_value());
}

TEST(Dtype, NamesRoundTripAndSizesMatchTheFormats) {
  for (const Dtype d : kDtypes) {
    EXPECT_EQ(parse_dtype(config_name(d)), d);
    EXPECT_EQ(parse_dtype(torch_name(d)), d);
  }
  EXPECT_EQ(torch_name(dtype_named("bf16")), "bfloat16");
  EXPECT_EQ(config_name(dtype_named("float16")), "fp16");
  EXPECT_EQ(bytes_of(Dtype::fp32), 4);
  EXPECT_EQ(bytes_of(Dtype::bf16), 2);
  EXPECT_EQ(bytes_of(Dtype::fp16), 2);
  EXPECT_FALSE(is_reduced_precision(Dtype::fp32));
  EXPECT_TRUE(is_reduced_precision(Dtype::bf16));
  EXPECT_TRUE(is_reduced_precision(Dtype::fp16));
}

TEST(Dtype, OnlyPyTorchSpellingIsAProfileKey) {
  EXPECT_TRUE(is_torch_name("float32"));
  EXPECT_TRUE(is_torch_name("bfloat16"));
  EXPECT_FALSE(is_torch_name("fp32"));
  EXPECT_FALSE(is_torch_name("half"));
  EXPECT_FALSE(is_torch_name("int8"));
}

TEST(Dtype, AnUnknownNameIsRefusedNamingTheKeyAndTheChoices) {
  try {
    dtype_named("fp8", "precision.param_dtype");
    FAIL() << "fp8 was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("precision.param_dtype 'fp8'"), std::string::npos) << what;
    EXPECT_NE(what.find("fp32 | bf16 | fp16"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace dtlab
