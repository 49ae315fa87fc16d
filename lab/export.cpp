// export.cpp: `dtlab export-reference` — the inputs of a run, for an outside implementation to replay
// (file formats in export.hpp).
#include "lab/export.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/atomic_file.hpp"
#include "lab/data.hpp"
#include "lab/model.hpp"
#include "lab/results.hpp"
#include "lab/train/schedule.hpp"

namespace dtlab {

namespace {

// A binary output file that reports failures with its path (and errno) instead of failing silently.
class BinaryWriter {
 public:
  explicit BinaryWriter(std::string path) : path_(std::move(path)) {
    errno = 0;
    out_.open(path_, std::ios::binary | std::ios::trunc);
    if (!out_) fail("cannot open for writing");
  }
  void write(const void* data, size_t bytes) {
    errno = 0;
    out_.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    if (!out_) fail("write failed");
  }
  // Writes a tensor's elements as they are laid out contiguously (REQUIRES: dtype as the caller expects).
  void write_tensor(const at::Tensor& t) {
    const at::Tensor c = t.detach().to(at::kCPU).contiguous();
    write(c.data_ptr(), c.nbytes());
  }
  void close() {
    errno = 0;
    out_.close();
    if (!out_) fail("close failed");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("export-reference: " + path_ + ": " + what +
                             (errno ? std::string(" (") + std::strerror(errno) + ")" : std::string()));
  }
  std::string path_;
  std::ofstream out_;
};

}  // namespace

void export_reference_inputs(const Config& config, int world_size, const std::string& out_dir) {
  const TrainConfig& t = config.train;
  if (world_size < 1)
    throw std::invalid_argument("export-reference: world size must be >= 1, got " + std::to_string(world_size));
  // The ranks of one model replica (pp x cp x tp); the rest of the world is data parallel and reads different data.
  const int64_t model_parallel = config.parallel.pp * config.parallel.cp * config.parallel.tp;
  if (world_size % model_parallel != 0)
    throw std::invalid_argument(
        "export-reference: world size " + std::to_string(world_size) +
        " is not a multiple of parallel.pp * parallel.cp * parallel.tp = " + std::to_string(model_parallel));
  const int data_parallel = static_cast<int>(world_size / model_parallel);
  if (t.micro_batch < 1 || t.global_batch % (t.micro_batch * data_parallel) != 0)
    throw std::invalid_argument("export-reference: train.global_batch=" + std::to_string(t.global_batch) +
                                " is not divisible by train.micro_batch * data-parallel ranks = " +
                                std::to_string(t.micro_batch) + " * " + std::to_string(data_parallel));
  const int64_t accumulation = t.global_batch / (t.micro_batch * data_parallel);
  const int64_t seq_len = config.model.seq_len;

  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) throw std::runtime_error("export-reference: cannot create directory " + out_dir + ": " + ec.message());
  const std::filesystem::path dir(out_dir);

  // Model exactly as train() builds it (before any strategy touches it: DDP broadcasts rank 0's copy,
  // which is this one, since every rank builds from the same seed).
  GPT model(config.model, t.seed);
  nlohmann::json params = nlohmann::json::array();
  {
    BinaryWriter init((dir / "init.bin").string());
    int64_t offset = 0;
    for (const ParamRef& p : model.parameters()) {
      const at::Tensor& tensor = *p.tensor;
      if (tensor.scalar_type() != at::kFloat)
        throw std::runtime_error("export-reference: parameter " + p.name + " is not float32");
      params.push_back({{"name", p.name},
                        {"shape", tensor.sizes().vec()},
                        {"numel", tensor.numel()},
                        {"offset_elements", offset},
                        {"is_norm_or_embedding", p.is_norm_or_embedding}});
      init.write_tensor(tensor);
      offset += tensor.numel();
    }
    init.close();
  }

  // One sampler per data-parallel rank, as each rank's trainer constructs it.
  auto source = make_token_source(config.data, config.model.vocab_size);
  std::vector<Sampler> samplers;
  samplers.reserve(static_cast<size_t>(data_parallel));
  for (int r = 0; r < data_parallel; ++r)
    samplers.emplace_back(*source, seq_len, t.global_batch, t.micro_batch, accumulation, r, data_parallel,
                          config.data.seed, config.data.mask_token);

  nlohmann::json target_counts = nlohmann::json::array();
  nlohmann::json learning_rates = nlohmann::json::array();
  {
    BinaryWriter batches((dir / "batches.bin").string());
    BinaryWriter weights((dir / "loss_weights.bin").string());
    for (int64_t step = 0; step < t.steps; ++step) {
      for (int r = 0; r < data_parallel; ++r) {
        for (int64_t micro = 0; micro < accumulation; ++micro) {
          const Batch batch = samplers[static_cast<size_t>(r)].batch(step, micro);
          if (batch.inputs.scalar_type() != at::kLong || batch.targets.scalar_type() != at::kLong)
            throw std::runtime_error("export-reference: sampler returned a non-int64 batch");
          batches.write_tensor(batch.inputs);
          batches.write_tensor(batch.targets);
        }
      }
      // Same expression as the trainer's loss_weight.
      const int64_t count = samplers[0].global_target_count(step);
      const double weight = 1.0 / static_cast<double>(std::max<int64_t>(1, count));
      weights.write(&weight, sizeof weight);
      target_counts.push_back(count);
      learning_rates.push_back(learning_rate(t, step));
    }
    batches.close();
    weights.close();
  }

  nlohmann::json manifest = {
      {"format", "dtlab reference inputs v1 (little-endian, no headers)"},
      {"files", {{"init", "init.bin"}, {"batches", "batches.bin"}, {"loss_weights", "loss_weights.bin"}}},
      {"params", params},
      {"param_count", model.parameter_count()},
      {"world_size", world_size},
      {"data_parallel", data_parallel},
      {"accumulation", accumulation},
      {"micro_batch", t.micro_batch},
      {"global_batch", t.global_batch},
      {"seq_len", seq_len},
      {"steps", t.steps},
      {"ignore_index", kIgnoreIndex},
      {"global_target_counts", target_counts},
      {"learning_rates", learning_rates},
      {"config", to_json(config)}};
  write_file_atomic((dir / "manifest.json").string(), manifest.dump(2) + "\n");
}

}  // namespace dtlab
