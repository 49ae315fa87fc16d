"""compare_ddp.py: the peer comparison — dtlab's `ddp` strategy against PyTorch's own DDP, same model, same
weights, same batches, same optimizer, same Gloo backend, same threads per rank; prints tokens/s of both,
the ratio dtlab/PyTorch (target >= 1.05 at world 2) and the step-by-step loss agreement, and records all of
it in results/peer/ddp_vs_pytorch.json. See docs/peer-comparison.md.

    ~/.cache/dtlab/venv/bin/python tests/reference/compare_ddp.py [--dtlab build/bin/dtlab]
        [--config tests/reference/peer_ddp.yaml] [--world-size 2] [--repeats 1] [--correctness-only]
        [section.key=value ...]

A thin entry point: the driver is peer_compare.py (shared with compare_fsdp.py), whose docstring describes the
two phases (a 10-step correctness check on `tiny`, every loss within rtol 1.3e-6 / atol 1e-5; then the timed
run, default `small`, 30 steps, global batch 8, micro 4, AdamW, world 2; --correctness-only stops after the first,
as `make test` runs it, label peer), the per-rank sessions and the exit status. Here the PyTorch side is
torch_ddp.py and the dtlab side `dtlab launch -n W setsid -w dtlab train ... parallel.strategy=ddp`.
Exit status: 0 when the figures were measured (whether or not the 1.05x target is met); 1 on any failed
command, on a tiny-phase loss outside fp32 tolerance, or on a timed-phase loss differing by more than 1e-3.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from peer_compare import REPO, PeerSpec, main  # noqa: E402

SPEC = PeerSpec(
    prog="compare_ddp",
    description="dtlab ddp vs PyTorch DDP: throughput and loss agreement",
    peer_script="torch_ddp.py",
    peer_label="PyTorch DDP",
    strategy="ddp",
    target_ratio=1.05,
    default_out=os.path.join(REPO, "results", "peer", "ddp_vs_pytorch.json"),
    default_work=os.path.join(REPO, "build", "peer-work", "ddp"),  # not under results/: the report reads that
    default_repeats=1,
    record_measured_steps=True,
)

if __name__ == "__main__":
    sys.exit(main(SPEC))
