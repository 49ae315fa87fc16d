// checkpoint_jobs.hpp: what the checkpoint tests share (checkpoint_test.cpp, reshard_test.cpp,
// data_resume_test.cpp): `dtlab train` of tiny as a real job, its step records (result.json or a killed rank's
// steps.jsonl), a checkpoint's parameters through the torch-free store reader, and the tolerance comparisons.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/checkpoint/safetensors.hpp"
#include "lab/checkpoint/store.hpp"
#include "tests/strategy/job.hpp"

namespace dtlab::ckpt_testing {

namespace fs = std::filesystem;

inline const std::string kBin = std::string(DTLAB_BINARY_DIR) + "/bin/";
inline const std::string kConfig = std::string(DTLAB_SOURCE_DIR) + "/tests/strategy/tiny_ddp.yaml";
inline constexpr int kSteps = 6;

inline std::string fresh_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "dtlab_ckpt_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// `dtlab train` of tiny for `steps` steps at `world` with `overrides` (parallel.strategy=single runs without a
// launcher, any other strategy under `dtlab launch -n world`); `extra` CLI flags; `env` for the job.
inline testing::JobResult train(int world, const std::string& out, const std::vector<std::string>& overrides,
                                const std::vector<std::string>& extra = {}, int steps = kSteps,
                                const std::vector<std::string>& env = {}) {
  std::vector<std::string> args;
  const bool single = std::find(overrides.begin(), overrides.end(), "parallel.strategy=single") != overrides.end();
  if (world > 1 || !single) args = {kBin + "dtlab", "launch", "-n", std::to_string(world)};
  for (const std::string& a : {kBin + "dtlab", std::string("train"), std::string("--config"), kConfig,
                               std::string("--out"), out, std::string("train.steps=") + std::to_string(steps)})
    args.push_back(a);
  args.insert(args.end(), extra.begin(), extra.end());
  args.insert(args.end(), overrides.begin(), overrides.end());
  return testing::run_job(args, 180, env);
}

inline nlohmann::json result_of(const std::string& out) {
  std::ifstream in(out + "/result.json");
  return nlohmann::json::parse(in);
}

inline nlohmann::json steps_of(const std::string& out) { return result_of(out).at("steps"); }

// Rank 0's step records as written, one line per step: what a killed job leaves behind (it writes no result.json).
inline nlohmann::json streamed_steps_of(const std::string& out) {
  std::ifstream in(out + "/rank0/steps.jsonl");
  nlohmann::json steps = nlohmann::json::array();
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) steps.push_back(nlohmann::json::parse(line));
  return steps;
}

// Every "param.*" tensor of a checkpoint (a step directory, or checkpoint.dir for its newest), assembled from its
// pieces, as raw bytes; `dtypes` (if given) receives each tensor's safetensors dtype.
inline std::map<std::string, std::vector<char>> parameters_of(const std::string& checkpoint_dir,
                                                              std::map<std::string, std::string>* dtypes = nullptr) {
  std::string dir;
  const checkpoint::Metadata meta = checkpoint::read_metadata(checkpoint_dir, &dir);
  std::map<std::string, std::vector<char>> out;
  for (const auto& [name, info] : meta.tensors) {
    if (name.rfind("param.", 0) != 0) continue;
    if (dtypes) (*dtypes)[name] = info.dtype;
    out[name] = checkpoint::read_whole_tensor(dir, meta, name);  // 1-D ranges and N-D chunks alike
  }
  return out;
}

// The same parameters as numbers (F32 or BF16 masters).
inline std::map<std::string, std::vector<double>> parameter_values(const std::string& checkpoint_dir) {
  std::map<std::string, std::string> dtypes;
  const auto raw = parameters_of(checkpoint_dir, &dtypes);
  std::map<std::string, std::vector<double>> out;
  for (const auto& [name, bytes] : raw) {
    std::vector<double>& values = out[name];
    if (dtypes.at(name) == "F32") {
      for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
        float f = 0;
        std::memcpy(&f, bytes.data() + i, 4);
        values.push_back(f);
      }
    } else if (dtypes.at(name) == "BF16") {  // the high half of an fp32
      for (size_t i = 0; i + 2 <= bytes.size(); i += 2) {
        uint16_t half = 0;
        std::memcpy(&half, bytes.data() + i, 2);
        const uint32_t word = static_cast<uint32_t>(half) << 16;
        float f = 0;
        std::memcpy(&f, &word, 4);
        values.push_back(f);
      }
    } else {
      ADD_FAILURE() << checkpoint_dir << ": " << name << " is " << dtypes.at(name) << ", not F32 or BF16";
    }
  }
  return out;
}

// |got - want| <= atol + rtol |want|, as torch.allclose.
inline bool close(double got, double want, double rtol, double atol) {
  return std::abs(got - want) <= atol + rtol * std::abs(want);
}

// Per step: the step number, the loss and the pre-clip gradient norm of `got` within (rtol, atol) of `want`.
inline void expect_steps_close(const nlohmann::json& got, const nlohmann::json& want, double rtol, double atol) {
  ASSERT_EQ(got.size(), want.size()) << got.dump();
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i]["step"], want[i]["step"]);
    for (const char* key : {"loss", "grad_norm"}) {
      const double g = got[i][key].get<double>(), w = want[i][key].get<double>();
      EXPECT_TRUE(close(g, w, rtol, atol)) << key << " of step " << i + 1 << ": " << g << ", the reference's " << w
                                           << " (|diff| " << std::abs(g - w) << ")";
    }
  }
}

// Every parameter of two checkpoints element by element within (rtol, atol); returns the largest |diff|.
inline double expect_parameters_close(const std::string& got_dir, const std::string& want_dir, double rtol,
                                      double atol) {
  const auto want = parameter_values(want_dir);
  const auto got = parameter_values(got_dir);
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(got.size(), want.size());
  double largest = 0;
  for (const auto& [name, w] : want) {
    const auto it = got.find(name);
    if (it == got.end() || it->second.size() != w.size()) {
      ADD_FAILURE() << name << " is missing or has another size in " << got_dir;
      continue;
    }
    int bad = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      largest = std::max(largest, std::abs(it->second[i] - w[i]));
      if (!close(it->second[i], w[i], rtol, atol) && bad++ == 0)
        ADD_FAILURE() << name << "[" << i << "] = " << it->second[i] << ", the reference's " << w[i];
    }
    EXPECT_EQ(bad, 0) << name << ": " << bad << " of " << w.size() << " elements outside rtol " << rtol << ", atol "
                      << atol;
  }
  return largest;
}

// Byte for byte: every parameter of `got_dir` equals `want_dir`'s.
inline void expect_parameters_identical(const std::string& got_dir, const std::string& want_dir) {
  const auto want = parameters_of(want_dir);
  const auto got = parameters_of(got_dir);
  ASSERT_FALSE(want.empty());
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, bytes] : want) EXPECT_TRUE(got.at(name) == bytes) << name << " differs from " << want_dir;
}

}  // namespace dtlab::ckpt_testing
