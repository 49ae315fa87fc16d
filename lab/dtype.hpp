// dtype.hpp: the lab's one dtype type. The three floating-point types it trains and communicates in, their two
// spellings and their size. Torch-free: lab/dtype_torch.hpp maps it to at::ScalarType for the runtime.
//
// The spellings: the config says fp32 | bf16 | fp16 (precision.*_dtype). result.json's comm records, the machine
// profile and comm-bench say what PyTorch says: float32 | bfloat16 | float16 (c10::getDtypeNames). Every place that
// turns one into the other, or a name into a size, goes through here.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dtlab {

enum class Dtype { fp32, bf16, fp16 };

inline constexpr std::array<Dtype, 3> kDtypes = {Dtype::fp32, Dtype::bf16, Dtype::fp16};

// fp32 | bf16 | fp16: the config's spelling.
constexpr std::string_view config_name(Dtype d) {
  switch (d) {
    case Dtype::fp32:
      return "fp32";
    case Dtype::bf16:
      return "bf16";
    case Dtype::fp16:
      return "fp16";
  }
  return "?";
}

// float32 | bfloat16 | float16: PyTorch's spelling, used by comm records, the machine profile and comm-bench.
constexpr std::string_view torch_name(Dtype d) {
  switch (d) {
    case Dtype::fp32:
      return "float32";
    case Dtype::bf16:
      return "bfloat16";
    case Dtype::fp16:
      return "float16";
  }
  return "?";
}

constexpr int64_t bytes_of(Dtype d) { return d == Dtype::fp32 ? 4 : 2; }

// bf16 and fp16: the 16-bit types of mixed precision.
constexpr bool is_reduced_precision(Dtype d) { return d != Dtype::fp32; }

// Either spelling (and c10's legacy "half" for float16); nullopt for anything else.
constexpr std::optional<Dtype> parse_dtype(std::string_view name) {
  for (Dtype d : kDtypes)
    if (name == config_name(d) || name == torch_name(d)) return d;
  if (name == "half") return Dtype::fp16;
  return std::nullopt;
}

// True for PyTorch's spelling only (float32 | bfloat16 | float16): the machine profile's keys.
constexpr bool is_torch_name(std::string_view name) {
  const std::optional<Dtype> d = parse_dtype(name);
  return d && torch_name(*d) == name;
}

// Either spelling, or std::invalid_argument naming `what` (the key or flag that held it) and the accepted names.
inline Dtype dtype_named(std::string_view name, std::string_view what = "dtype") {
  if (const std::optional<Dtype> d = parse_dtype(name)) return *d;
  throw std::invalid_argument(std::string(what) + " '" + std::string(name) +
                              "' is not a dtype: fp32 | bf16 | fp16 (or float32 | bfloat16 | float16)");
}

}  // namespace dtlab
