"""peer_train.py: the training loop shared by the PyTorch peers (torch_ddp.py, torch_fsdp2.py) — dtlab's trainer
loop (lab/train/trainer.cpp) written with PyTorch's own pieces, run under torchrun on dtlab's exported inputs.

Each peer builds its wrapped model and hands PeerRun.train() its specific parts: how one micro-step runs
forward and backward (DDP.no_sync, or FSDP2 as is), how the gradient norm is summed (over full gradients, or
over DTensor shards with an all-reduce) and how a gradient is viewed for clipping. Shared here: argument
parsing (--export, --out, --zero-grad), process-group setup (Gloo, world-size check, threads per rank as
dtlab's configure_threads), the optimizer (dtlab's decay groups, single-tensor AdamW/SGD), the step:
  zero_grad; for each micro-step: forward_backward(inputs, targets, loss_weight[step], last)
  global loss = all_reduce(sum of local weighted losses)              # float64, for reporting
  norm = grad_norm(params)
  if grad_clip > 0 and norm > grad_clip: grads *= grad_clip / (norm + 1e-6)
  lr = manifest learning_rates[step]; opt.step()
its timing (time.perf_counter, no barriers added; tokens/s excludes the first instrument.warmup_steps steps
exactly as dtlab's summary does), the per-step loss line and rank 0's JSON result.
"""

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dtlab_gpt import ReferenceInputs  # noqa: E402


def make_optimizer(train, named_params, norm_or_embedding, tag="torch_ddp"):
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
    raise SystemExit(f"{tag}: train.optimizer={train['optimizer']} is not adamw | sgd")


def summed_grad_norm(params, view=lambda g: g):
    """The gradient norm when each rank holds part of the gradients (FSDP2's shards, a pipeline's stages): each rank
    sums the fp32 squares of its own in dtlab's parameter order, then a float64 all-reduce over the ranks (as dtlab's
    sharded strategies and pipeline plan). view(grad) is the tensor a rank holds (a DTensor's local shard)."""
    sq = 0.0
    for p in params:
        if p.grad is not None:
            g = view(p.grad)
            if g.numel():
                sq += g.pow(2).sum().item()
    sq_t = torch.tensor([sq], dtype=torch.float64)
    dist.all_reduce(sq_t)
    return math.sqrt(sq_t.item())


class PeerRun:
    """One peer's run: parses its arguments, joins the process group and sets threads on construction."""

    def __init__(self, doc, tag):
        self.tag = tag                       # "torch_ddp": error messages
        self.label = tag.replace("_", " ")   # "torch ddp": progress lines
        ap = argparse.ArgumentParser(description=doc.split("\n")[0])
        ap.add_argument("--export", required=True, help="directory written by `dtlab export-reference`")
        ap.add_argument("--out", required=True, help="JSON file for the results (written by rank 0)")
        ap.add_argument("--zero-grad", choices=["none", "zero"], default="none",
                        help="optimizer.zero_grad(set_to_none=True) (PyTorch's default) or in-place zeroing like dtlab")
        self.args = ap.parse_args()

        self.ref = ReferenceInputs(self.args.export)
        self.cfg = self.ref.config
        self.train_cfg = self.cfg["train"]
        dist.init_process_group(backend="gloo")
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        if self.world != self.ref.world_size:
            raise SystemExit(f"{tag}: {self.args.export} was exported for world size {self.ref.world_size}, "
                             f"but {self.world} ranks were started")
        # Threads per rank as dtlab's configure_threads: train.threads, else cores / the ranks on this machine
        # (DTLAB_HOST_RANKS under dtlab launch, whose emulated nodes share one machine; else the local ranks). As in
        # dtlab's rank discovery, the variable counts only when dtlab launch started this rank.
        under_dtlab = os.environ.get("DTLAB_LAUNCHER") == "dtlab" and os.environ.get("DTLAB_HOST_RANKS")
        host_ranks = int(os.environ["DTLAB_HOST_RANKS"] if under_dtlab
                         else os.environ.get("LOCAL_WORLD_SIZE", self.world))
        self.threads = int(self.train_cfg.get("threads", 0)) or max(1, (os.cpu_count() or 1) // max(1, host_ranks))
        torch.set_num_threads(self.threads)

    def make_optimizer(self, named_params):
        return make_optimizer(self.train_cfg, named_params, self.ref.is_norm_or_embedding(), self.tag)

    def train(self, opt, params, forward_backward, grad_norm, grad_view=lambda g: g, run_step=None):
        """Runs every step. forward_backward(inputs, targets, weight, last) -> this micro-step's local weighted
        loss (float), gradients accumulated; grad_norm(params) -> the global gradient norm; grad_view(grad) ->
        the tensor that clipping scales in place. run_step(step, weight) -> this rank's local weighted loss, when
        one call runs every micro-batch of the step (a pipeline schedule), in place of the micro-step loop.
        Keeps losses, grad_norms and step_ms on self."""
        ref = self.ref
        clip = float(self.train_cfg["grad_clip"])
        set_to_none = self.args.zero_grad == "none"
        self.losses, self.step_ms, self.grad_norms = [], [], []
        for step in range(ref.steps):
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=set_to_none)
            weight = float(ref.loss_weights[step])
            local_loss = 0.0
            if run_step is not None:
                local_loss = run_step(step, weight)
            else:
                for micro in range(ref.accumulation):
                    inputs, targets = ref.batch(step, self.rank, micro)
                    local_loss += forward_backward(inputs, targets, weight, micro == ref.accumulation - 1)
            total = torch.tensor([local_loss], dtype=torch.float64)
            dist.all_reduce(total)
            global_loss = total.item()
            if not math.isfinite(global_loss):
                raise SystemExit(f"{self.tag}: loss is {global_loss} at step {step + 1}")
            norm = grad_norm(params)
            if clip > 0.0 and norm > clip:
                factor = clip / (norm + 1e-6)
                for p in params:
                    if p.grad is not None:
                        grad_view(p.grad).mul_(factor)
            lr = ref.learning_rates[step]
            for group in opt.param_groups:
                group["lr"] = lr
            opt.step()
            self.step_ms.append((time.perf_counter() - t0) * 1000.0)
            self.losses.append(global_loss)
            self.grad_norms.append(norm)
            if self.rank == 0:
                print(f"{self.label} step {step + 1}/{ref.steps} | loss {global_loss:.4f} | lr {lr:.1e} | "
                      f"{self.step_ms[-1]:.1f} ms", flush=True)

    def finish(self, extra):
        """Rank 0 writes the JSON result (the common fields plus `extra`, the peer's own settings); every rank
        leaves the process group."""
        ref, args = self.ref, self.args
        warmup = int(self.cfg["instrument"]["warmup_steps"])
        measured = self.step_ms[warmup:] or self.step_ms
        tokens_per_step = ref.micro_batch * ref.accumulation * ref.data_parallel * ref.seq_len
        tokens_per_s = tokens_per_step * len(measured) / (sum(measured) / 1000.0)
        if self.rank == 0:
            out = {"losses": self.losses, "grad_norms": self.grad_norms, "step_ms": self.step_ms,
                   "tokens_per_s": tokens_per_s, "measured_steps": len(measured), "world_size": self.world,
                   "threads": self.threads, "torch_version": torch.__version__, "zero_grad": args.zero_grad,
                   **extra}
            os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
            tmp = args.out + ".tmp"
            with open(tmp, "w") as f:
                json.dump(out, f, indent=2)
            os.replace(tmp, args.out)
            print(f"{self.label}: {tokens_per_s:.0f} tokens/s over {len(measured)} steps, {self.threads} "
                  f"thread(s)/rank -> {args.out}", flush=True)
        dist.destroy_process_group()
