// dtype_torch_test.cpp: lab/dtype_torch.hpp agrees with PyTorch: every Dtype maps to the ScalarType whose c10 name
// is the Dtype's torch_name, and back.
#include "lab/dtype_torch.hpp"

#include <gtest/gtest.h>

namespace dtlab {
namespace {

TEST(DtypeTorch, EachDtypeIsTheScalarTypePyTorchNamesTheSame) {
  for (const Dtype d : kDtypes) {
    const at::ScalarType t = scalar_type(d);
    EXPECT_EQ(std::string(c10::getDtypeNames(t).first), torch_name(d));
    EXPECT_EQ(c10::elementSize(t), static_cast<size_t>(bytes_of(d)));
    EXPECT_EQ(dtype_of(t), d);
  }
  EXPECT_EQ(scalar_type_named("bf16"), at::kBFloat16);
  EXPECT_EQ(scalar_type_named("float16"), at::kHalf);
  EXPECT_FALSE(dtype_of(at::kDouble).has_value());
  EXPECT_FALSE(dtype_of(at::kLong).has_value());
  EXPECT_THROW(scalar_type_named("float64", "precision.reduce_dtype"), std::invalid_argument);
}

}  // namespace
}  // namespace dtlab
