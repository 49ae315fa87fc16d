"""torch_fsdp2.py: PyTorch's own FSDP2 (`torch.distributed.fsdp.fully_shard`) training dtlab's GPT on dtlab's
exported inputs — the peer that dtlab's `fsdp_full_shard` strategy is measured against
(tests/reference/compare_fsdp.py, docs/peer-comparison.md).

    torchrun --standalone --nproc-per-node=W tests/reference/torch_fsdp2.py --export DIR --out FILE

DIR comes from `dtlab export-reference ... --world-size W`. Sharding: fully_shard(block) for every transformer
block, then fully_shard(root), with reshard_after_forward=True (FULL_SHARD: gather in forward, free, re-gather
in backward, reduce-scatter). The root group holds tok_embedding, final_norm and lm_head: one unit, where
dtlab (parallel.wrap=block) makes the embedding one unit and final_norm + head another. No mixed precision
(fp32 compute and reduce), Gloo, CPU.

The step is torch_ddp.py's (dtlab's trainer loop) with FSDP2's pieces:
  zero_grad; for each micro-step: loss = CE_sum * loss_weight[step]; (loss * W).backward()
      # FSDP2 reduce-scatters every micro-step and divides by W -> the global mean, sharded (as dtlab)
  global loss = all_reduce(sum of local weighted losses)              # float64, for reporting
  norm = sqrt(all_reduce(sum over params, dtlab order, of float(local_shard(grad)^2 .sum())))  # as dtlab FSDP
  if grad_clip > 0 and norm > grad_clip: grads *= grad_clip / (norm + 1e-6)
  lr = manifest learning_rates[step]; torch.optim AdamW/SGD on the DTensor shards (foreach=False, fused=False)
Timing as torch_ddp.py. Rank 0 writes FILE (JSON).

dtlab_gpt.DtlabGPT computes the blocks from the root's forward without calling the Block modules, so
FSDP2's per-module hooks would never fire; here each Block gets a forward() (the same ops: block_attention
then block_mlp) and the root calls the blocks as modules. The ops and their order are unchanged.
"""

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dtlab_gpt import Block, DtlabGPT, ReferenceInputs  # noqa: E402
from torch_ddp import make_optimizer  # noqa: E402


class ShardedBlock(Block):
    """A Block whose forward runs the block's ops (DtlabGPT.block_attention + block_mlp) with the root's
    configuration and RoPE tables, so that FSDP2's pre/post-forward hooks on the block fire."""

    def forward(self, x):
        root = self.__dict__["_dtlab_root"]  # plain attribute: not registered as a submodule
        return DtlabGPT.block_mlp(root, self, DtlabGPT.block_attention(root, self, x))


class ShardedGPT(DtlabGPT):
    def forward(self, tokens):
        x = F.embedding(tokens, self.tok_embedding)
        for blk in self.block:
            x = blk(x)
        h = F.rms_norm(x, (x.size(-1),), self.final_norm, self.eps)
        return F.linear(h, self.tok_embedding if self.tied else self.lm_head)


def local(t):
    return t.to_local() if hasattr(t, "to_local") else t


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
        raise SystemExit(f"torch_fsdp2: {args.export} was exported for world size {ref.world_size}, "
                         f"but torchrun started {world} ranks")
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    threads = int(train.get("threads", 0)) or max(1, (os.cpu_count() or 1) // max(1, local_world))
    torch.set_num_threads(threads)

    model = ref.load_model()  # full init.bin weights on every rank; fully_shard keeps each rank's shard
    model.__class__ = ShardedGPT
    for blk in model.block:
        blk.__class__ = ShardedBlock
        blk.__dict__["_dtlab_root"] = model
    mesh = torch.distributed.device_mesh.init_device_mesh("cpu", (world,))
    for blk in model.block:
        fully_shard(blk, mesh=mesh, reshard_after_forward=True)
    fully_shard(model, mesh=mesh, reshard_after_forward=True)
    named = model.dtlab_parameters()  # now DTensors (Shard(0)), still in dtlab's order
    params = [p for _, p in named]
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
            loss = DtlabGPT.loss_sum(model(inputs), targets) * weight
            (loss * W).backward()
            local_loss += loss.item()
        total = torch.tensor([local_loss], dtype=torch.float64)
        dist.all_reduce(total)
        global_loss = total.item()
        if not math.isfinite(global_loss):
            raise SystemExit(f"torch_fsdp2: loss is {global_loss} at step {step + 1}")
        sq = 0.0
        for p in params:
            if p.grad is not None:
                g = local(p.grad)
                if g.numel():
                    sq += g.pow(2).sum().item()
        sq_t = torch.tensor([sq], dtype=torch.float64)
        dist.all_reduce(sq_t)
        norm = math.sqrt(sq_t.item())
        if clip > 0.0 and norm > clip:
            factor = clip / (norm + 1e-6)
            for p in params:
                if p.grad is not None:
                    local(p.grad).mul_(factor)
        lr = ref.learning_rates[step]
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
        step_ms.append((time.perf_counter() - t0) * 1000.0)
        losses.append(global_loss)
        grad_norms.append(norm)
        if rank == 0:
            print(f"torch fsdp2 step {step + 1}/{ref.steps} | loss {global_loss:.4f} | lr {lr:.1e} | "
                  f"{step_ms[-1]:.1f} ms", flush=True)

    warmup = int(cfg["instrument"]["warmup_steps"])
    measured = step_ms[warmup:] or step_ms
    tokens_per_step = ref.micro_batch * ref.accumulation * world * ref.seq_len
    tokens_per_s = tokens_per_step * len(measured) / (sum(measured) / 1000.0)
    if rank == 0:
        out = {"losses": losses, "grad_norms": grad_norms, "step_ms": step_ms, "tokens_per_s": tokens_per_s,
               "measured_steps": len(measured), "world_size": world, "threads": threads,
               "torch_version": torch.__version__, "zero_grad": args.zero_grad,
               "fsdp2": {"units": ["block.<l> (each)", "root: tok_embedding + final_norm + lm_head"],
                         "reshard_after_forward": True, "mixed_precision": None, "backend": "gloo"}}
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f, indent=2)
        os.replace(tmp, args.out)
        print(f"torch fsdp2: {tokens_per_s:.0f} tokens/s over {len(measured)} steps, {threads} thread(s)/rank "
              f"-> {args.out}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
