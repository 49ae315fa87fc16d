"""compare_tp.py: the tensor-parallel peer comparison — dtlab's tensor parallel (parallel.tp, optionally with sequence
parallel, under `ddp` at dp 1 or `fsdp_full_shard` over the data-parallel ranks) against PyTorch's own (DTensor
parallelize_module with ColwiseParallel / RowwiseParallel / SequenceParallel and loss_parallel, FSDP2 over the dp
dimension; tests/reference/torch_tp.py): same model, weights, batches, optimizer, Gloo backend and threads per rank;
prints tokens/s of both, the ratio dtlab/PyTorch (target >= 1.0 at tp 2 and at tp 2 x FSDP2 dp 2) and the
step-by-step loss agreement, and records it in results/peer/tp_vs_pytorch.json. See docs/peer-comparison.md.

    ~/.cache/dtlab/venv/bin/python tests/reference/compare_tp.py [--world-size 2] [--tp 2] [--sequence-parallel]
        [--strategy ddp|fsdp_full_shard] [--repeats 3] [--correctness-only] [section.key=value ...]

    compare_tp.py                                                           # tp 2 alone, world 2
    compare_tp.py --world-size 4 --strategy fsdp_full_shard                # tp 2 x FULL_SHARD / FSDP2 over dp 2

The default run is tests/reference/peer_ddp.yaml (`small`, 30 steps, global batch 8, micro 4). Phase 1 (correctness on
`tiny`, 10 steps) needs every loss within rtol 1.3e-6 / atol 1e-5; phase 2 is the timed run, the two sides
alternating --repeats times (median). The phases, helpers and exit rules are peer_compare.py's.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from peer_compare import REPO, PeerSpec, main  # noqa: E402

SPEC = PeerSpec(
    prog="compare_tp",
    description="dtlab tensor parallel (parallel.tp) vs PyTorch DTensor tensor parallel: throughput and loss agreement",
    peer_script="torch_tp.py",
    peer_label="PyTorch DTensor TP",
    strategy="ddp",
    target_ratio=1.0,
    default_out=os.path.join(REPO, "results", "peer", "tp_vs_pytorch.json"),
    default_work=os.path.join(REPO, "build", "peer-work", "tp"),  # not under results/: the report reads that
    default_repeats=3,
    report_extra={"peer": "torch.distributed.tensor.parallel (parallelize_module, loss_parallel) + FSDP2"},
    record_strategy=True,
    report_max_abs_loss_diff=True,
    tensor_parallel=True,
)

if __name__ == "__main__":
    sys.exit(main(SPEC))
