"""torch_tp.py: PyTorch's own tensor parallel (DTensor `parallelize_module` with ColwiseParallel, RowwiseParallel,
SequenceParallel and the vocabulary-parallel `loss_parallel`), optionally under FSDP2 over the data-parallel ranks,
training dtlab's GPT on dtlab's exported inputs — the peer that dtlab's tensor parallel (parallel.tp,
lab/train/tensor_parallel*.cpp) is measured against (tests/reference/compare_tp.py, docs/peer-comparison.md).

    torchrun --standalone --nproc-per-node=W tests/reference/torch_tp.py --export DIR --out FILE

DIR comes from `dtlab export-reference ... parallel.tp=T [parallel.sequence_parallel=true]
[parallel.strategy=fsdp_full_shard] --world-size W`; tp, sequence parallel and the strategy are read from its config.
The mesh is (dp, tp) = (W / T, T) with tp innermost, as dtlab's (lab/mesh.hpp): rank r reads data-parallel rank
r // T's batches. The plan is Megatron's, written the way torchtitan writes it:
  embedding      vocabulary-parallel (RowwiseParallel on the embedding: rows of the vocabulary per rank)
  wq, wk, wv     ColwiseParallel (heads per rank)      wo      RowwiseParallel (all-reduce of the block's output)
  w_gate, w_up   ColwiseParallel                       w_down  RowwiseParallel
  lm_head        ColwiseParallel with a DTensor output sharded on the vocabulary, and loss_parallel(): no rank holds
                 the full logits (dtlab's vocabulary-parallel cross-entropy)
With sequence parallel the norms are SequenceParallel (1/T of the sequence each), an all-gather (PrepareModuleInput)
precedes attention and the MLP and the row-parallel outputs are reduce-scattered to the sequence (Shard(1)).
Under parallel.strategy=fsdp_full_shard and W > T each block and then the root are fully_shard-ed over the dp
dimension (FSDP2 over the TP shards, reshard_after_forward=True); under ddp dp must be 1 (the comparison runs
tp alone or tp x FSDP2, the two layouts of the issue).

The step is peer_train.py's (dtlab's trainer loop):
  zero_grad; for each micro-step: loss = CE_sum * loss_weight[step]; (loss * dp).backward()   # FSDP2 divides by dp
  global loss = all_reduce(sum of tp rank 0's weighted losses)    # every tp rank holds the same loss
  norm = sqrt(all_reduce(sum over params, dtlab order, of float(local(grad)^2 .sum()) x shards / W))
      # a parameter held whole by every rank is counted once, a sharded one once per shard
  clip the local gradients, lr from the manifest, torch.optim AdamW/SGD on the DTensor parameters
Timing as peer_train.py.
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                               SequenceParallel, loss_parallel, parallelize_module)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dtlab_gpt import BLOCK_PARAM_NAMES, DtlabGPT, apply_rope  # noqa: E402
from peer_train import PeerRun  # noqa: E402


def linear(weight):
    """An nn.Linear without bias holding `weight` ([out, in], as dtlab's)."""
    layer = nn.Linear(weight.size(1), weight.size(0), bias=False)
    layer.weight = weight
    return layer


def rms_norm(weight, eps):
    norm = nn.RMSNorm(weight.size(0), eps=eps)
    norm.weight = weight
    return norm


class Attention(nn.Module):
    """The attention of dtlab's block (DtlabGPT.block_attention) on this rank's heads: wq/wk/wv column-parallel give
    H/T query and KV/T key-value heads, so every view uses -1 heads."""

    def __init__(self, blk, root):
        super().__init__()
        self.__dict__["_root"] = root  # RoPE tables and head sizes; not a submodule
        self.wq, self.wk, self.wv, self.wo = linear(blk.wq), linear(blk.wk), linear(blk.wv), linear(blk.wo)

    def forward(self, h):
        root = self.__dict__["_root"]
        B, S, hd = h.size(0), h.size(1), root.head_dim
        q = self.wq(h).view(B, S, -1, hd).transpose(1, 2)
        k = self.wk(h).view(B, S, -1, hd).transpose(1, 2)
        v = self.wv(h).view(B, S, -1, hd).transpose(1, 2)
        q = apply_rope(q, root.rope_cos, root.rope_sin)
        k = apply_rope(k, root.rope_cos, root.rope_sin)
        H, KV = q.size(1), k.size(1)
        if KV != H:  # grouped-query, expanded as dtlab does
            k = k.unsqueeze(2).expand(B, KV, H // KV, S, hd).reshape(B, H, S, hd)
            v = v.unsqueeze(2).expand(B, KV, H // KV, S, hd).reshape(B, H, S, hd)
        attn = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        return self.wo(attn.transpose(1, 2).reshape(B, S, H * hd))


class Mlp(nn.Module):
    def __init__(self, blk):
        super().__init__()
        self.w_gate, self.w_up, self.w_down = linear(blk.w_gate), linear(blk.w_up), linear(blk.w_down)

    def forward(self, h):
        return self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


class TpBlock(nn.Module):
    def __init__(self, blk, root):
        super().__init__()
        self.attn_norm, self.attention = rms_norm(blk.attn_norm, root.eps), Attention(blk, root)
        self.mlp_norm, self.mlp = rms_norm(blk.mlp_norm, root.eps), Mlp(blk)

    def forward(self, x):
        x = x + self.attention(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class TpGPT(nn.Module):
    """DtlabGPT's ops as modules (so that parallelize_module can replace them), on the same Parameter objects."""

    def __init__(self, root):
        super().__init__()
        if root.tied:
            raise SystemExit("torch_tp: model.tie_embeddings=true: the peer's plan shards embedding and head apart")
        self.tok_embedding = nn.Embedding(root.vocab, root.d)
        self.tok_embedding.weight = root.tok_embedding
        self.block = nn.ModuleList(TpBlock(blk, root) for blk in root.block)
        self.final_norm = rms_norm(root.final_norm, root.eps)
        self.lm_head = linear(root.lm_head)

    def forward(self, tokens):
        x = self.tok_embedding(tokens)
        for blk in self.block:
            x = blk(x)
        return self.lm_head(self.final_norm(x))

    def dtlab_parameters(self):
        """[(dtlab name, parameter)] in dtlab's model order, read after parallelize_module / fully_shard replaced the
        parameters by DTensors."""
        out = [("tok_embedding", self.tok_embedding.weight)]
        for l, blk in enumerate(self.block):
            where = {"attn_norm": blk.attn_norm, "mlp_norm": blk.mlp_norm, "wq": blk.attention.wq,
                     "wk": blk.attention.wk, "wv": blk.attention.wv, "wo": blk.attention.wo, "w_gate": blk.mlp.w_gate,
                     "w_up": blk.mlp.w_up, "w_down": blk.mlp.w_down}
            out += [(f"block.{l}.{n}", where[n].weight) for n in BLOCK_PARAM_NAMES]
        return out + [("final_norm", self.final_norm.weight), ("lm_head", self.lm_head.weight)]


def tensor_parallel_plan(sequence_parallel):
    """The root's and each block's plans (torchtitan's layout for a Llama-style model)."""
    seq = Shard(1) if sequence_parallel else Replicate()
    root = {"tok_embedding": RowwiseParallel(input_layouts=Replicate(), output_layouts=seq),
            "lm_head": ColwiseParallel(input_layouts=seq, output_layouts=Shard(-1), use_local_output=False)}
    block = {"attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(), "attention.wv": ColwiseParallel(),
             "attention.wo": RowwiseParallel(output_layouts=seq),
             "mlp.w_gate": ColwiseParallel(), "mlp.w_up": ColwiseParallel(),
             "mlp.w_down": RowwiseParallel(output_layouts=seq)}
    if sequence_parallel:
        root["final_norm"] = SequenceParallel()
        def gather():  # the sequence-sharded input all-gathered before a tensor-parallel region
            return PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))
        block.update({"attn_norm": SequenceParallel(), "attention": gather(), "mlp_norm": SequenceParallel(),
                      "mlp": gather()})
    return root, block


def grad_norm(params, world):
    """sqrt(sum of squares of every gradient, each counted once): a DTensor's local square sum is weighted by
    (shards of it) / world, a plain tensor's (held whole by every rank) by 1 / world, then one float64 all-reduce.
    A gradient left as partial sums (Partial: sequence parallel's norm weights, whose tokens are spread over the tp
    ranks) is summed first; the optimizer does the same when it meets it."""
    sq = 0.0
    for p in params:
        g = p.grad
        if g is None:
            continue
        if hasattr(g, "to_local"):
            if any(placement.is_partial() for placement in g.placements):  # sequence parallel's norm weights
                g = g.redistribute(g.device_mesh, [Replicate() if pl.is_partial() else pl for pl in g.placements])
            shards = 1
            for dim, placement in enumerate(g.placements):
                if not placement.is_replicate():  # Shard, or FSDP2-over-TP's _StridedShard
                    shards *= g.device_mesh.size(dim)
            local = g.to_local()
        else:
            shards, local = 1, g
        if local.numel():
            sq += local.pow(2).sum().item() * shards / world
    total = torch.tensor([sq], dtype=torch.float64)
    dist.all_reduce(total)
    return total.item() ** 0.5


def main():
    run = PeerRun(__doc__, "torch_tp")
    par = run.cfg["parallel"]
    T, sp, strategy = int(par["tp"]), bool(par["sequence_parallel"]), par["strategy"]
    dp = run.world // T
    if T < 2 or run.world % T or int(par.get("pp", 1)) != 1 or run.ref.data_parallel != dp:
        raise SystemExit(f"torch_tp: needs parallel.tp >= 2 dividing the {run.world} ranks and pp 1 (export: tp {T}, "
                         f"data_parallel {run.ref.data_parallel})")
    if dp > 1 and strategy != "fsdp_full_shard":
        raise SystemExit(f"torch_tp: with {dp} data-parallel ranks the peer runs FSDP2: parallel.strategy="
                         f"fsdp_full_shard (got {strategy})")
    mesh = init_device_mesh("cpu", (dp, T), mesh_dim_names=("dp", "tp"))
    tp_rank, dp_rank = mesh["tp"].get_local_rank(), mesh["dp"].get_local_rank()
    root = run.ref.load_model()  # full weights on every rank; parallelize_module keeps this rank's shards
    model = TpGPT(root)
    root_plan, block_plan = tensor_parallel_plan(sp)
    for blk in model.block:
        parallelize_module(blk, mesh["tp"], block_plan)
    parallelize_module(model, mesh["tp"], root_plan)
    if dp > 1:
        for blk in model.block:
            fully_shard(blk, mesh=mesh["dp"], reshard_after_forward=True)
        fully_shard(model, mesh=mesh["dp"], reshard_after_forward=True)
    named = model.dtlab_parameters()
    opt = run.make_optimizer(named)

    def run_step(step, weight):
        """Every micro-batch of the step on the data-parallel rank's batches (the mesh's dp coordinate)."""
        total = 0.0
        for micro in range(run.ref.accumulation):
            inputs, targets = run.ref.batch(step, dp_rank, micro)
            with loss_parallel():
                loss = DtlabGPT.loss_sum(model(inputs), targets) * weight
                (loss * dp).backward()  # FSDP2 divides by dp -> the global mean
            if tp_rank == 0:  # every tp rank holds the same loss
                total += loss.full_tensor().item() if hasattr(loss, "full_tensor") else loss.item()
        return total

    local = lambda g: g.to_local() if hasattr(g, "to_local") else g
    run.train(opt, [p for _, p in named], None, lambda params: grad_norm(params, run.world), grad_view=local,
              run_step=run_step)
    run.finish({"tensor_parallel": {"tp": T, "sequence_parallel": sp, "data_parallel": dp,
                                    "fsdp2_over_dp": dp > 1, "loss_parallel": True, "backend": "gloo"}})


if __name__ == "__main__":
    main()
