// dtype_torch.hpp: the runtime's side of lab/dtype.hpp: Dtype <-> at::ScalarType.
#pragma once

#include <c10/core/ScalarType.h>

#include <optional>

#include "lab/dtype.hpp"

namespace dtlab {

constexpr at::ScalarType scalar_type(Dtype d) {
  switch (d) {
    case Dtype::fp32:
      return at::kFloat;
    case Dtype::bf16:
      return at::kBFloat16;
    case Dtype::fp16:
      return at::kHalf;
  }
  return at::kFloat;
}

// The config's or PyTorch's name -> at::ScalarType; std::invalid_argument naming `what` otherwise.
inline at::ScalarType scalar_type_named(std::string_view name, std::string_view what = "dtype") {
  return scalar_type(dtype_named(name, what));
}

// nullopt for the types the lab does not train in (integers, float64, ...).
constexpr std::optional<Dtype> dtype_of(at::ScalarType t) {
  for (Dtype d : kDtypes)
    if (scalar_type(d) == t) return d;
  return std::nullopt;
}

}  // namespace dtlab
