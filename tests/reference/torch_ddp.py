"""torch_ddp.py: PyTorch's own DistributedDataParallel training dtlab's GPT on dtlab's exported inputs — the
peer that dtlab's `ddp` strategy is measured against (tests/reference/compare_ddp.py, docs/peer-comparison.md).

    torchrun --standalone --nproc-per-node=W tests/reference/torch_ddp.py --export DIR --out FILE

DIR comes from `dtlab export-reference ... --world-size W`. The step is dtlab's trainer loop (lab/train/
trainer.cpp) written with PyTorch's own pieces:
  zero_grad; for each micro-step (DDP.no_sync on all but the last):
      loss = CE_sum * loss_weight[step];  (loss * W).backward()      # DDP averages over W -> global mean
  global loss = all_reduce(sum of local weighted losses)              # float64, for reporting
  norm = sqrt(sum over params, dtlab order, of float(grad^2 .sum()))  # float32 sums, float64 total
  if grad_clip > 0 and norm > grad_clip: grads *= grad_clip / (norm + 1e-6)
  lr = manifest learning_rates[step]; torch.optim AdamW/SGD single-tensor step (foreach=False, fused=False)
Each step is timed with time.perf_counter (no barriers added); tokens/s excludes the first
instrument.warmup_steps steps exactly as dtlab's summary does. Rank 0 writes FILE (JSON).
The loop, timing and result are peer_train.py's (shared with torch_fsdp2.py); here: the DDP wrapping, the
micro-step under no_sync and the norm over full gradients.
"""

import contextlib
import math
import os
import sys

from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dtlab_gpt import DtlabGPT  # noqa: E402
from peer_train import PeerRun, make_optimizer  # noqa: E402,F401  (make_optimizer: kept importable from here)


def grad_norm(params):
    """sqrt of the float32 sums of squares of every gradient, in dtlab's order, totalled in float64."""
    sq = 0.0
    for p in params:
        if p.grad is not None:
            sq += p.grad.pow(2).sum().item()
    return math.sqrt(sq)


def main():
    run = PeerRun(__doc__, "torch_ddp")
    model = run.ref.load_model()
    named = model.dtlab_parameters()
    bucket_cap_mb = float(run.cfg["parallel"]["bucket_cap_mb"])
    ddp = DDP(model, bucket_cap_mb=bucket_cap_mb, gradient_as_bucket_view=True, broadcast_buffers=False)
    opt = run.make_optimizer(named)
    W = float(run.world)

    def forward_backward(inputs, targets, weight, last):
        with contextlib.nullcontext() if last else ddp.no_sync():
            loss = DtlabGPT.loss_sum(ddp(inputs), targets) * weight
            (loss * W).backward()  # DDP averages over W -> the global mean
        return loss.item()

    run.train(opt, [p for _, p in named], forward_backward, grad_norm)
    run.finish({"ddp": {"bucket_cap_mb": bucket_cap_mb, "gradient_as_bucket_view": True,
                        "broadcast_buffers": False, "backend": "gloo"}})


if __name__ == "__main__":
    main()
