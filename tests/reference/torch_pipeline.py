"""torch_pipeline.py: PyTorch's own pipeline schedules (`torch.distributed.pipelining`) training dtlab's GPT on
dtlab's exported inputs — the peer that dtlab's pipeline runtime (parallel.pp, lab/train/pipeline_step.cpp) is
measured against (tests/reference/compare_pipeline.py, docs/peer-comparison.md).

    torchrun --standalone --nproc-per-node=P tests/reference/torch_pipeline.py --export DIR --out FILE

DIR comes from `dtlab export-reference ... parallel.pp=P [parallel.pp_schedule=S parallel.pp_virtual_stages=v
parallel.pp_split=...] --world-size P`; the stages, schedule and split are read from its config, so both sides
run the same pipeline. One replica (data parallel 1): every rank is one pipeline rank.

Stages as dtlab cuts them (lab/pipeline_split.cpp): K = P * v virtual stages of consecutive blocks, balanced =
floor(L / K) blocks each and the first L % K one more, or the boundaries of parallel.pp_split; the embedding with
the first stage, the final norm and head with the last; virtual stage k on rank k % P. Each stage is a
PipelineStage over a module that runs its blocks with DtlabGPT's ops. Schedules: gpipe -> ScheduleGPipe, 1f1b ->
Schedule1F1B, interleaved_1f1b -> ScheduleInterleaved1F1B, zero_bubble -> ScheduleInterleavedZeroBubble (with one
chunk per rank: ZB-H1's B/W split).

The step is dtlab's trainer loop with one schedule call in place of the micro-step loop:
  zero_grad; schedule.step(whole batch of m micro-batches)   # loss_fn = CE_sum * loss_weight[step], scale_grads off
  global loss = all_reduce(sum of the last stage's micro-batch losses)   # float64, for reporting
  norm = sqrt(all_reduce(sum over this rank's params, dtlab order, of float(grad^2 .sum())))  # as dtlab's pp norm
  clip, learning rate, torch.optim AdamW/SGD on this rank's parameters (foreach=False, fused=False)
Timing as torch_ddp.py (peer_train.py); the first step includes the schedule's shape inference and is a warm-up.
"""

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed import pipelining

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dtlab_gpt import DtlabGPT  # noqa: E402
from peer_train import PeerRun, summed_grad_norm  # noqa: E402

SCHEDULES = {"gpipe": pipelining.ScheduleGPipe, "1f1b": pipelining.Schedule1F1B,
             "interleaved_1f1b": pipelining.ScheduleInterleaved1F1B,
             "zero_bubble": pipelining.ScheduleInterleavedZeroBubble}
MULTI_STAGE = {"interleaved_1f1b", "zero_bubble"}  # schedules that take a list of stages per rank


def stage_blocks(n_layers, stages, split):
    """[[block index, ...] per virtual stage]: dtlab's rule (lab/pipeline_split.cpp)."""
    if split:
        starts = [0] + [int(x) for x in str(split).split(",")]
        if len(starts) != stages or starts != sorted(set(starts)) or starts[-1] >= n_layers:
            raise SystemExit(f"torch_pipeline: parallel.pp_split={split} does not name {stages - 1} increasing "
                             f"first blocks below {n_layers}")
        ends = starts[1:] + [n_layers]
        return [list(range(a, b)) for a, b in zip(starts, ends)]
    base, extra = divmod(n_layers, stages)
    out, first = [], 0
    for k in range(stages):
        count = base + (1 if k < extra else 0)
        out.append(list(range(first, first + count)))
        first += count
    return out


class StageModule(nn.Module):
    """One virtual stage: [embedding] -> its blocks -> [final norm, head]; the same Parameter objects as the root."""

    def __init__(self, root, blocks, first, last):
        super().__init__()
        self.__dict__["_root"] = root  # for the model's settings and RoPE tables; not registered as a submodule
        self.first, self.last = first, last
        self.blocks = nn.ModuleList(root.block[b] for b in blocks)
        if first:
            self.tok_embedding = root.tok_embedding
        if last:
            self.final_norm, self.lm_head = root.final_norm, root.lm_head

    def forward(self, x):
        root = self.__dict__["_root"]
        if self.first:
            x = F.embedding(x, self.tok_embedding)
        for blk in self.blocks:
            x = root.block_mlp(blk, root.block_attention(blk, x))
        if self.last:
            x = F.linear(F.rms_norm(x, (x.size(-1),), self.final_norm, root.eps), self.lm_head)
        return x


def main():
    run = PeerRun(__doc__, "torch_pipeline")
    par = run.cfg["parallel"]
    P, v = int(par["pp"]), int(par["pp_virtual_stages"])
    schedule_name = par["pp_schedule"]
    if P != run.world or run.ref.data_parallel != 1:
        raise SystemExit(f"torch_pipeline: runs one replica: parallel.pp={P} must equal the {run.world} ranks "
                         f"(export data_parallel={run.ref.data_parallel})")
    if schedule_name not in SCHEDULES:
        raise SystemExit(f"torch_pipeline: parallel.pp_schedule={schedule_name} is not one of {sorted(SCHEDULES)}")
    model = run.ref.load_model()
    if model.tied:
        raise SystemExit("torch_pipeline: model.tie_embeddings=true: the embedding and head sit on different stages")
    K = P * v
    blocks = stage_blocks(model.n_layers, K, par.get("pp_split", ""))
    mine = [k for k in range(K) if k % P == run.rank]  # this rank's virtual stages, chunk order
    device = torch.device("cpu")
    modules = [StageModule(model, blocks[k], k == 0, k == K - 1) for k in mine]
    stages = [pipelining.PipelineStage(mod, k, K, device) for mod, k in zip(modules, mine)]

    weight = [0.0]  # this step's loss factor, read by loss_fn

    def loss_fn(logits, targets):
        return DtlabGPT.loss_sum(logits, targets) * weight[0]

    m = run.ref.accumulation
    cls = SCHEDULES[schedule_name]
    schedule = cls(stages if schedule_name in MULTI_STAGE else stages[0], m, loss_fn=loss_fn, scale_grads=False)

    # This rank's parameters in dtlab's model order (the gradient norm sums in that order).
    held = {id(p) for mod in modules for p in mod.parameters()}
    named = [(n, p) for n, p in model.dtlab_parameters() if id(p) in held]
    opt = run.make_optimizer(named)
    has_first, has_last = 0 in mine, K - 1 in mine

    def run_step(step, weight_now):
        weight[0] = weight_now
        pairs = [run.ref.batch(step, 0, micro) for micro in range(m)]
        inputs = torch.cat([x for x, _ in pairs])   # the schedule cuts it back into the same m micro-batches
        targets = torch.cat([y for _, y in pairs])
        losses = [] if has_last else None
        args = (inputs,) if has_first else ()
        schedule.step(*args, target=targets if has_last else None, losses=losses, return_outputs=False)
        return sum(loss.item() for loss in losses) if has_last else 0.0

    run.train(opt, [p for _, p in named], None, summed_grad_norm, run_step=run_step)
    run.finish({"pipelining": {"schedule": cls.__name__, "stages": K, "virtual_stages_per_rank": v,
                               "microbatches": m, "blocks_per_stage": [len(b) for b in blocks],
                               "scale_grads": False, "backend": "gloo"}})


if __name__ == "__main__":
    main()
