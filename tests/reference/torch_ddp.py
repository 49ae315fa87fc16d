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
"""

import argparse
import contextlib
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dtlab_gpt import DtlabGPT, ReferenceInputs  # noqa: E402


def make_optimizer(train, named_params, norm_or_embedding):
    """Two param groups (decay / no decay) chosen like dtlab: decay unless the tensor is a norm or the
    embedding, or train.decay_norms_and_embeddings is set."""
    decay_all = bool(train["decay_norms_and_embeddings"])
    wd = float(train["weight_decay"])
    decay = [p for n, p in named_params if decay_all or not norm_or_embedding[n]]
    no_decay = [p for n, p in named_params if not (decay_all or not norm_or_embedding[n])]
    groups = [g for g in ({"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0})
              if g["params"]]
    lr = float(train["lr"])  # replaced every step by the manifest's schedule
    if train["optimizer"] == "adamw":
        return torch.optim.AdamW(groups, lr=lr, betas=(float(train["beta1"]), float(train["beta2"])),
                                 eps=float(train["eps"]), foreach=False, fused=False)
    if train["optimizer"] == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=float(train["momentum"]), dampening=0.0,
                               nesterov=False, foreach=False)
    raise SystemExit(f"torch_ddp: train.optimizer={train['optimizer']} is not adamw | sgd")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--export", required=True, help="directory written by `dtlab export-reference`")
    ap.add_argument("--out", required=True, help="JSON file for the results (written by rank 0)")
    ap.add_argument("--zero-grad", choices=["none", "zero"], default="none",
                    help="optimizer.zero_grad(set_to_none=True) (PyTorch's default) or in-place zeroing like dtlab")
    args = ap.parse_args()

    ref = ReferenceInputs(args.export)
    cfg = ref.config
    train = cfg["train"]
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if world != ref.world_size:
        raise SystemExit(f"torch_ddp: {args.export} was exported for world size {ref.world_size}, "
                         f"but torchrun started {world} ranks")
    # Threads per rank as dtlab's configure_threads: train.threads, else cores / local ranks.
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    threads = int(train.get("threads", 0)) or max(1, (os.cpu_count() or 1) // max(1, local_world))
    torch.set_num_threads(threads)

    model = ref.load_model()
    named = model.dtlab_parameters()
    params = [p for _, p in named]
    ddp = DDP(model, bucket_cap_mb=float(cfg["parallel"]["bucket_cap_mb"]), gradient_as_bucket_view=True,
              broadcast_buffers=False)
    opt = make_optimizer(train, named, ref.is_norm_or_embedding())

    W = float(world)
    clip = float(train["grad_clip"])
    set_to_none = args.zero_grad == "none"
    losses, step_ms, grad_norms = [], [], []
    for step in range(ref.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=set_to_none)
        weight = float(ref.loss_weights[step])
        local_loss = 0.0
        for micro in range(ref.accumulation):
            inputs, targets = ref.batch(step, rank, micro)
            last = micro == ref.accumulation - 1
            with contextlib.nullcontext() if last else ddp.no_sync():
                loss = DtlabGPT.loss_sum(ddp(inputs), targets) * weight
                (loss * W).backward()
            local_loss += loss.item()
        total = torch.tensor([local_loss], dtype=torch.float64)
        dist.all_reduce(total)
        global_loss = total.item()
        if not math.isfinite(global_loss):
            raise SystemExit(f"torch_ddp: loss is {global_loss} at step {step + 1}")
        sq = 0.0
        for p in params:
            if p.grad is not None:
                sq += p.grad.pow(2).sum().item()
        norm = math.sqrt(sq)
        if clip > 0.0 and norm > clip:
            factor = clip / (norm + 1e-6)
            for p in params:
                if p.grad is not None:
                    p.grad.mul_(factor)
        lr = ref.learning_rates[step]
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
        step_ms.append((time.perf_counter() - t0) * 1000.0)
        losses.append(global_loss)
        grad_norms.append(norm)
        if rank == 0:
            print(f"torch ddp step {step + 1}/{ref.steps} | loss {global_loss:.4f} | lr {lr:.1e} | "
                  f"{step_ms[-1]:.1f} ms", flush=True)

    warmup = int(cfg["instrument"]["warmup_steps"])
    measured = step_ms[warmup:] or step_ms
    tokens_per_step = ref.micro_batch * ref.accumulation * world * ref.seq_len
    tokens_per_s = tokens_per_step * len(measured) / (sum(measured) / 1000.0)
    if rank == 0:
        out = {"losses": losses, "grad_norms": grad_norms, "step_ms": step_ms, "tokens_per_s": tokens_per_s,
               "measured_steps": len(measured), "world_size": world, "threads": threads,
               "torch_version": torch.__version__, "zero_grad": args.zero_grad,
               "ddp": {"bucket_cap_mb": float(cfg["parallel"]["bucket_cap_mb"]), "gradient_as_bucket_view": True,
                       "broadcast_buffers": False, "backend": "gloo"}}
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f, indent=2)
        os.replace(tmp, args.out)
        print(f"torch ddp: {tokens_per_s:.0f} tokens/s over {len(measured)} steps, {threads} thread(s)/rank "
              f"-> {args.out}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
