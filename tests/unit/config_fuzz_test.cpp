// config_fuzz_test.cpp: random overrides and YAML against the config layer of lab/config.hpp — only ConfigError
// ever escapes, and what loads survives validation and a JSON round trip.
//
//   ./build/bin/config_tests --gtest_filter='ConfigFuzz*'
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lab/config.hpp"
#include "strategies/catalog.hpp"

namespace dtlab {
namespace {

using Strings = std::vector<std::string>;

// Random overrides (known keys, typo'd keys, garbage; plausible and implausible values) and random YAML:
// loading must either succeed with a config that survives validate() and a JSON round trip, or throw a
// ConfigError whose message says "config:". Anything else (a crash, another exception type) fails.
TEST(ConfigFuzz, OnlyConfigErrorEscapes) {
  constexpr int kIterations = 10000;
#if defined(__SANITIZE_ADDRESS__) || !defined(NDEBUG)
  constexpr double kTimeLimit_s = 60.0;  // sanitizer / debug builds run ~15x slower
#else
  constexpr double kTimeLimit_s = 5.0;  // about 0.5 s in Release on one core
#endif
  std::mt19937_64 rng(20240611);
  const Strings keys = config_keys();
  const Strings values = {"0",
                          "1",
                          "-1",
                          "2",
                          "3",
                          "4",
                          "8",
                          "16",
                          "64",
                          "256",
                          "1e-3",
                          "0.5",
                          "1.5",
                          "-0.1",
                          "true",
                          "false",
                          "abc",
                          "",
                          "fp16",
                          "bf16",
                          "fp32",
                          "dynamic",
                          "none",
                          "small",
                          "tiny",
                          "7b",
                          "125m",
                          "huge",
                          "file",
                          "synthetic",
                          "ddp",
                          "fsdp_hybrid",
                          "zero1",
                          "adamw",
                          "sgd",
                          "cosine",
                          "step",
                          "auto",
                          "on",
                          "off",
                          "nan",
                          "inf",
                          ".inf",
                          "1e400",
                          "99999999999999999999",
                          "-9223372036854775808",
                          "9223372036854775807",
                          "[1, 2]",
                          "{a: 1}",
                          "'quoted'",
                          "\"x\"",
                          "[",
                          "&a",
                          "*b",
                          "!!str 5",
                          "null",
                          "~",
                          "0x10",
                          "1_000",
                          "- x",
                          "a: b: c",
                          "'",
                          "\"",
                          "#",
                          "%YAML",
                          "\t",
                          "1e-400"};
  const auto pick = [&](const auto& pool) { return pool[rng() % pool.size()]; };
  const auto garbage = [&] {
    std::string s(rng() % 12, ' ');
    for (char& ch : s) ch = static_cast<char>(rng() % 2 ? ' ' + rng() % 95 : rng() % 256);
    return s;
  };
  const auto random_key = [&] {
    std::string key = pick(keys);
    switch (rng() % 10) {
      case 0:
        key[rng() % key.size()] = static_cast<char>('a' + rng() % 26);
        break;  // typo
      case 1:
        key = key.substr(key.find('.') + 1);
        break;  // section left out
      case 2:
        key = garbage();
        break;
      default:
        break;
    }
    return key;
  };
  const auto random_value = [&] { return rng() % 8 == 0 ? garbage() : pick(values); };
  const Strings worlds = {"1", "2", "3", "4", "8"};

  int loaded = 0, rejected = 0, failures = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kIterations && failures < 5; ++i) {
    Strings overrides;
    const size_t count = rng() % 2 ? rng() % 3 : rng() % 8;
    for (size_t o = 0; o < count; ++o)
      overrides.push_back(rng() % 20 == 0 ? garbage() : random_key() + "=" + random_value());
    std::string yaml;
    if (rng() % 4 == 0)
      for (int line = 0; line < 3; ++line) {
        const std::string key = random_key();
        const auto dot = key.find('.');
        yaml += dot == std::string::npos
                    ? key + ": " + random_value() + "\n"
                    : key.substr(0, dot) + ":\n  " + key.substr(dot + 1) + ": " + random_value() + "\n";
      }
    if (rng() % 50 == 0) yaml = garbage();
    const int64_t world_size = rng() % 20 == 0 ? static_cast<int64_t>(rng() % 5) - 2 : std::stoll(pick(worlds));
    try {
      const Config c = load_config_text(yaml, overrides, world_size, "fuzz.yaml");
      validate(c);
      const Config back = from_json(to_json(c), c.world_size);
      if (to_json(back) != to_json(c) || format_table(c).empty()) {
        ++failures;
        ADD_FAILURE() << "round trip changed the config for overrides of iteration " << i;
      }
      ++loaded;
    } catch (const ConfigError& e) {
      const std::string message = e.what();
      if (message.find("config:") == std::string::npos) {
        ++failures;
        ADD_FAILURE() << "ConfigError without 'config:': " << message;
      }
      ++rejected;
    } catch (const std::exception& e) {
      ++failures;
      ADD_FAILURE() << "non-ConfigError exception at iteration " << i << ": " << e.what();
    }
  }
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("config fuzz: %d loaded, %d rejected with ConfigError, %d failures, %.2f s\n", loaded, rejected, failures,
              elapsed_s);
  EXPECT_EQ(loaded + rejected, kIterations);
  EXPECT_GT(loaded, kIterations / 50);  // the generator also reaches valid configs
  EXPECT_LT(elapsed_s, kTimeLimit_s);
}

}  // namespace
}  // namespace dtlab
