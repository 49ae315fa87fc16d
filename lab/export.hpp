// export.hpp: exports the exact inputs of a dtlab run (initial weights, every rank's micro-batches, loss
// weights, learning rates) so an outside implementation — tests/reference/torch_ddp.py, PyTorch's own DDP —
// can train the same model on the same data and be compared step by step (`dtlab export-reference`).
//
// Files written into out_dir (all little-endian, no headers; manifest.json describes them):
//   init.bin          every parameter as float32, in model order (GPT::parameters()), concatenated
//   batches.bin       for step in [0, steps), data-parallel rank in [0, D), micro in [0, accumulation):
//                       inputs  int64 [micro_batch, seq_len], then targets int64 [micro_batch, seq_len]
//                     (targets hold -100 where the loss ignores them)
//   loss_weights.bin  float64 per step: 1 / global_target_count(step), the trainer's loss normaliser
//   manifest.json     params [{name, shape, numel, offset_elements, is_norm_or_embedding}], world_size (W, the
//                     ranks started), data_parallel (D = W / (pp * cp * tp), the ranks reading different data),
//                     accumulation, micro_batch, global_batch, seq_len, steps, global_target_counts,
//                     learning_rates (learning_rate(train, step) for every step), the resolved config
//                     (to_json) and the file names above
// The model and sampler are built exactly as train() builds them (GPT(config.model, train.seed); the
// token source from config.data; Sampler per data-parallel rank, accumulation = global_batch / (micro_batch * D)).
#pragma once

#include <string>

#include "lab/config.hpp"

namespace dtlab {

// REQUIRES: world_size >= 1, a multiple of pp * cp * tp, and global_batch divisible by micro_batch * D.
// Creates out_dir if needed. Throws std::invalid_argument on a bad shape, std::runtime_error naming the
// path when a file cannot be written, DataError when the token source cannot be opened.
void export_reference_inputs(const Config& config, int world_size, const std::string& out_dir);

}  // namespace dtlab
