// tensor_parallel_cost.hpp: the cost piece of tensor (and sequence) parallelism — the collectives its layers add to
// one optimizer step on the tp group (torch-free; the runtime piece is lab/train/tensor_parallel.hpp).
//
// Per micro-batch of b sequences of s tokens, with A = b·s·d activation bytes, L blocks (the stage's, under pp) and
// t ranks:
//   tensor parallel    forward: 1 + 2L all-reduces of A (the embedding's and each block half's leave)
//                      backward: 1 + 2L all-reduces of A (the head's and each block half's enter)
//   sequence parallel  the same calls as reduce-scatters (forward leave, backward enter) and all-gathers (forward
//                      enter, backward leave) of A — same bytes on the wire per rank, twice the calls — plus one
//                      all-reduce of d elements per norm weight in backward (2L + 1)
//   recompute          activation checkpointing reruns a recomputed region's forward collectives in backward: both
//                      block halves under full (on every parallel.checkpoint_every-th block), the attention half
//                      under selective
//   loss               vocabulary-parallel cross-entropy: an all-gather of each rank's row maxima (t·b·s fp32) and
//                      two all-reduces of b·s fp32 (the sum of exponentials, the targets' logits)
// and per step one all-reduce of an fp64 scalar (the replicated norms counted once in the gradient norm).
#pragma once

#include "lab/config.hpp"
#include "strategies/cost_plan.hpp"

namespace dtlab {

// Appends tensor parallelism's collectives (mesh_dim "tp") on world rank `rank` to `plan`; nothing when
// parallel.tp == 1. Under parallel.pp > 1 only the rank's stage's units count: the embedding's on the first stage,
// the head's and the loss's on the last, the blocks' of its chunks.
void add_tensor_parallel_collectives(CostPlan& plan, const Config& config, int rank);

}  // namespace dtlab
