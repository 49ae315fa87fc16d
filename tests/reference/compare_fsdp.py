"""compare_fsdp.py: the FSDP peer comparison — dtlab's `fsdp_full_shard` strategy against PyTorch's FSDP2
(`fully_shard`, tests/reference/torch_fsdp2.py): same model, weights, batches, optimizer, Gloo backend and
threads per rank; prints tokens/s of both, the ratio dtlab/PyTorch (target >= 1.3 at world 2) and the
step-by-step loss agreement, and records it in results/peer/fsdp_vs_pytorch.json. See docs/peer-comparison.md.

    ~/.cache/dtlab/venv/bin/python tests/reference/compare_fsdp.py [--dtlab build/bin/dtlab]
        [--config tests/reference/peer_ddp.yaml] [--world-size 2] [--repeats 3] [--correctness-only]
        [section.key=value ...]

A thin entry point like compare_ddp.py: the phases, helpers and exit rules are peer_compare.py's. 1. correctness
on `tiny`, 10 steps, every loss within rtol 1.3e-6 / atol 1e-5; 2. the timed run (default `small`, 30 steps,
global batch 8, micro 4, AdamW, world 2), the two sides alternating --repeats times (median); --correctness-only
(or --skip-timed) stops after 1; `make test` runs it so (label peer). The dtlab side is `dtlab launch -n W
setsid -w dtlab train ... parallel.strategy=fsdp_full_shard`.
Exit status: 0 when the figures were measured (whether or not 1.3x is met); 1 on a failed command, a tiny-phase
loss outside fp32 tolerance, or a timed-phase loss differing by more than 1e-3.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from peer_compare import REPO, PeerSpec, main  # noqa: E402

SPEC = PeerSpec(
    prog="compare_fsdp",
    description="dtlab fsdp_full_shard vs PyTorch FSDP2: throughput and loss agreement",
    peer_script="torch_fsdp2.py",
    peer_label="PyTorch FSDP2",
    strategy="fsdp_full_shard",
    target_ratio=1.3,
    default_out=os.path.join(REPO, "results", "peer", "fsdp_vs_pytorch.json"),
    default_work=os.path.join(REPO, "build", "peer-work", "fsdp"),  # not under results/: the report reads that
    default_repeats=3,
    skip_timed_flag=True,
    report_extra={"strategy": "fsdp_full_shard", "peer": "torch.distributed.fsdp.fully_shard (FSDP2)"},
    record_strategy=True,
    report_max_abs_loss_diff=True,
)

if __name__ == "__main__":
    sys.exit(main(SPEC))
