"""dtlab_gpt.py: dtlab's GPT (lab/model.hpp, lab/model.cpp) written in PyTorch, op for op, so that PyTorch's
own training machinery (DDP, torch.optim) can be run on the very same model and compared with dtlab.

Contract: given the same weights (init.bin from `dtlab export-reference`) and the same tokens, forward() and
loss_sum() execute the same ATen ops in the same order as dtlab, so results agree to fp32 rounding (in practice
bit for bit on CPU at equal thread counts).

Parameter names are dtlab's ("tok_embedding", "block.<l>.wq", ..., "final_norm", "lm_head"). torch's
named_parameters() yields the root's own tensors (tok_embedding, final_norm, lm_head) before the blocks;
dtlab_parameters() yields them in dtlab's model order, which is the order init.bin is laid out in and the
order every order-sensitive computation here (gradient norm) uses.
"""

import json
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

IGNORE_INDEX = -100  # lab/data.hpp kIgnoreIndex
BLOCK_PARAM_NAMES = ["attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up", "w_down"]


def make_rope_tables(seq_len, head_dim, theta):
    """Angle of pair i at position p: p * theta^(-2i/hd), in float64, stored as float32 (make_rope_tables)."""
    opts = dict(dtype=torch.float64)
    inv_freq = torch.pow(theta, -torch.arange(0, head_dim, 2, **opts) / float(head_dim))
    angles = torch.outer(torch.arange(seq_len, **opts), inv_freq)
    return torch.cos(angles).to(torch.float32), torch.sin(angles).to(torch.float32)


def apply_rope(x, cos, sin):
    """Rotates x [B, heads, S, hd] in (first half, second half) pairs: (a, b) -> (a cos - b sin, b cos + a sin)."""
    half = x.size(-1) // 2
    seq = x.size(-2)
    cos = cos[:seq].to(x.dtype)
    sin = sin[:seq].to(x.dtype)
    a = x.narrow(-1, 0, half)
    b = x.narrow(-1, half, half)
    return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)


class Block(nn.Module):
    """One transformer block; parameters registered in BlockParams order. Linear weights are [out, in]."""

    def __init__(self, d, n_heads, n_kv_heads, ffn):
        super().__init__()
        hd = d // n_heads
        empty = lambda *shape: nn.Parameter(torch.empty(*shape, dtype=torch.float32))
        self.attn_norm = empty(d)
        self.wq = empty(n_heads * hd, d)
        self.wk = empty(n_kv_heads * hd, d)
        self.wv = empty(n_kv_heads * hd, d)
        self.wo = empty(d, n_heads * hd)
        self.mlp_norm = empty(d)
        self.w_gate = empty(ffn, d)
        self.w_up = empty(ffn, d)
        self.w_down = empty(d, ffn)


class DtlabGPT(nn.Module):
    """token embedding -> n_layers x [pre-RMSNorm attention (RoPE, GQA, causal SDPA) + pre-RMSNorm SwiGLU]
    -> final RMSNorm -> LM head (tied to the embedding when model.tie_embeddings)."""

    def __init__(self, model_cfg):
        super().__init__()
        m = model_cfg
        self.d = int(m["d_model"])
        self.n_layers = int(m["n_layers"])
        self.n_heads = int(m["n_heads"])
        self.n_kv_heads = int(m["n_kv_heads"])
        self.head_dim = self.d // self.n_heads
        self.vocab = int(m["vocab_size"])
        self.eps = float(m["norm_eps"])
        self.tied = bool(m["tie_embeddings"])
        self.tok_embedding = nn.Parameter(torch.empty(self.vocab, self.d, dtype=torch.float32))
        self.block = nn.ModuleList(
            Block(self.d, self.n_heads, self.n_kv_heads, int(m["ffn_hidden"])) for _ in range(self.n_layers))
        self.final_norm = nn.Parameter(torch.empty(self.d, dtype=torch.float32))
        self.lm_head = None if self.tied else nn.Parameter(torch.empty(self.vocab, self.d, dtype=torch.float32))
        cos, sin = make_rope_tables(int(m["seq_len"]), self.head_dim, float(m["rope_theta"]))
        # Not parameters and not persistent: DDP neither buckets nor (with broadcast_buffers=False) syncs them.
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def dtlab_parameters(self):
        """[(name, parameter)] in dtlab's model order: embedding, blocks (BlockParams order), final_norm, lm_head."""
        out = [("tok_embedding", self.tok_embedding)]
        for l, blk in enumerate(self.block):
            out += [(f"block.{l}.{n}", getattr(blk, n)) for n in BLOCK_PARAM_NAMES]
        out.append(("final_norm", self.final_norm))
        if self.lm_head is not None:
            out.append(("lm_head", self.lm_head))
        return out

    def block_attention(self, blk, x):
        B, S = x.size(0), x.size(1)
        H, KV, hd = self.n_heads, self.n_kv_heads, self.head_dim
        h = F.rms_norm(x, (x.size(-1),), blk.attn_norm, self.eps)
        q = F.linear(h, blk.wq).view(B, S, H, hd).transpose(1, 2)
        k = F.linear(h, blk.wk).view(B, S, KV, hd).transpose(1, 2)
        v = F.linear(h, blk.wv).view(B, S, KV, hd).transpose(1, 2)
        q = apply_rope(q, self.rope_cos, self.rope_sin)
        k = apply_rope(k, self.rope_cos, self.rope_sin)
        if KV != H:  # grouped-query: expanded like dtlab, so SDPA takes the same fused CPU kernel
            k = k.unsqueeze(2).expand(B, KV, H // KV, S, hd).reshape(B, H, S, hd)
            v = v.unsqueeze(2).expand(B, KV, H // KV, S, hd).reshape(B, H, S, hd)
        attn = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        attn = attn.transpose(1, 2).reshape(B, S, H * hd)
        return x + F.linear(attn, blk.wo)

    def block_mlp(self, blk, x):
        h = F.rms_norm(x, (x.size(-1),), blk.mlp_norm, self.eps)
        return x + F.linear(F.silu(F.linear(h, blk.w_gate)) * F.linear(h, blk.w_up), blk.w_down)

    def forward(self, tokens):
        """tokens int64 [B, S] -> logits [B, S, V]."""
        x = F.embedding(tokens, self.tok_embedding)
        for blk in self.block:
            x = self.block_mlp(blk, self.block_attention(blk, x))
        h = F.rms_norm(x, (x.size(-1),), self.final_norm, self.eps)
        return F.linear(h, self.tok_embedding if self.tied else self.lm_head)

    @staticmethod
    def loss_sum(logits, targets):
        """Sum of token cross-entropies over targets != -100, fp32 (GPT::loss_sum)."""
        V = logits.size(-1)
        return F.cross_entropy(logits.reshape(-1, V).to(torch.float32), targets.reshape(-1),
                               reduction="sum", ignore_index=IGNORE_INDEX)


class ReferenceInputs:
    """The files written by `dtlab export-reference` (format: lab/export.hpp)."""

    def __init__(self, export_dir):
        self.dir = export_dir
        path = os.path.join(export_dir, "manifest.json")
        try:
            with open(path) as f:
                self.manifest = json.load(f)
        except OSError as e:
            raise SystemExit(f"reference: cannot read {path}: {e} (run `dtlab export-reference` first)")
        m = self.manifest
        self.config = m["config"]
        self.world_size = int(m["world_size"])  # ranks started
        self.data_parallel = int(m.get("data_parallel", self.world_size))  # ranks reading different data
        self.accumulation = int(m["accumulation"])
        self.micro_batch = int(m["micro_batch"])
        self.seq_len = int(m["seq_len"])
        self.steps = int(m["steps"])
        self.learning_rates = [float(x) for x in m["learning_rates"]]
        self.loss_weights = self._read("loss_weights", np.float64, self.steps)
        per_micro = 2 * self.micro_batch * self.seq_len
        self.batches = self._read("batches", np.int64,
                                  self.steps * self.data_parallel * self.accumulation * per_micro)
        self.batches = self.batches.reshape(self.steps, self.data_parallel, self.accumulation, 2,
                                            self.micro_batch, self.seq_len)

    def _read(self, key, dtype, count):
        path = os.path.join(self.dir, self.manifest["files"][key])
        data = np.fromfile(path, dtype=dtype)
        if data.size != count:
            raise SystemExit(f"reference: {path} holds {data.size} values of {np.dtype(dtype).name}, "
                             f"manifest says {count}")
        return data

    def batch(self, step, rank, micro):
        """(inputs, targets), int64 [micro_batch, seq_len] each: what dtlab's Sampler gives data-parallel rank `rank`
        at (step, micro)."""
        pair = self.batches[step, rank, micro]
        return torch.from_numpy(pair[0]), torch.from_numpy(pair[1])

    def load_model(self):
        """A DtlabGPT holding init.bin's weights, checked against the manifest's names and shapes."""
        model = DtlabGPT(self.config["model"])
        path = os.path.join(self.dir, self.manifest["files"]["init"])
        flat = np.fromfile(path, dtype=np.float32)
        params = model.dtlab_parameters()
        entries = self.manifest["params"]
        if [e["name"] for e in entries] != [n for n, _ in params]:
            raise SystemExit("reference: parameter names/order in manifest.json differ from DtlabGPT: "
                             f"{[e['name'] for e in entries]} vs {[n for n, _ in params]}")
        total = sum(int(e["numel"]) for e in entries)
        if flat.size != total:
            raise SystemExit(f"reference: {path} holds {flat.size} floats, manifest says {total}")
        with torch.no_grad():
            for (name, p), e in zip(params, entries):
                if list(p.shape) != list(e["shape"]):
                    raise SystemExit(f"reference: {name} has shape {list(p.shape)}, manifest says {e['shape']}")
                off, n = int(e["offset_elements"]), int(e["numel"])
                p.copy_(torch.from_numpy(flat[off:off + n].copy()).view(p.shape))
        return model

    def is_norm_or_embedding(self):
        return {e["name"]: bool(e["is_norm_or_embedding"]) for e in self.manifest["params"]}


def within_tolerance(a, b, rtol=1.3e-6, atol=1e-5):
    """torch.testing's fp32 rule: |a - b| <= atol + rtol * |b|."""
    return abs(a - b) <= atol + rtol * abs(b)


if __name__ == "__main__":
    # Smoke check: one forward on exported inputs. Usage: python dtlab_gpt.py EXPORT_DIR
    import sys
    ref = ReferenceInputs(sys.argv[1])
    model = ref.load_model()
    x, y = ref.batch(0, 0, 0)
    loss = DtlabGPT.loss_sum(model(x), y) * float(ref.loss_weights[0])
    print(f"params {sum(p.numel() for _, p in model.dtlab_parameters())}, "
          f"step-0 rank-0 micro-0 weighted loss {loss.item():.9g}, uniform-guess loss/token {math.log(model.vocab):.4f}")
