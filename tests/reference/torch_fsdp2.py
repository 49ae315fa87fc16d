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
Timing as torch_ddp.py. Rank 0 writes FILE (JSON). The loop, timing and result are peer_train.py's (shared with
torch_ddp.py); here: the fully_shard wrapping, the norm over DTensor shards and clipping of the local shards.

dtlab_gpt.DtlabGPT computes the blocks from the root's forward without calling the Block modules, so
FSDP2's per-module hooks would never fire; here each Block gets a forward() (the same ops: block_attention
then block_mlp) and the root calls the blocks as modules. The ops and their order are unchanged.
"""

import os
import sys

import torch
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dtlab_gpt import Block, DtlabGPT  # noqa: E402
from peer_train import PeerRun, summed_grad_norm  # noqa: E402


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
    run = PeerRun(__doc__, "torch_fsdp2")
    model = run.ref.load_model()  # full init.bin weights on every rank; fully_shard keeps each rank's shard
    model.__class__ = ShardedGPT
    for blk in model.block:
        blk.__class__ = ShardedBlock
        blk.__dict__["_dtlab_root"] = model
    mesh = torch.distributed.device_mesh.init_device_mesh("cpu", (run.world,))
    for blk in model.block:
        fully_shard(blk, mesh=mesh, reshard_after_forward=True)
    fully_shard(model, mesh=mesh, reshard_after_forward=True)
    named = model.dtlab_parameters()  # now DTensors (Shard(0)), still in dtlab's order
    opt = run.make_optimizer(named)
    W = float(run.world)

    def forward_backward(inputs, targets, weight, last):
        # FSDP2 reduce-scatters every micro-step and divides by W -> the global mean, sharded (as dtlab)
        loss = DtlabGPT.loss_sum(model(inputs), targets) * weight
        (loss * W).backward()
        return loss.item()

    run.train(opt, [p for _, p in named], forward_backward, lambda params: summed_grad_norm(params, local),
              grad_view=local)
    run.finish({"fsdp2": {"units": ["block.<l> (each)", "root: tok_embedding + final_norm + lm_head"],
                          "reshard_after_forward": True, "mixed_precision": None, "backend": "gloo"}})


if __name__ == "__main__":
    main()
