"""compare_pipeline.py: the pipeline peer comparison — dtlab's pipeline runtime (parallel.pp under `ddp` with one
replica; lab/train/pipeline_step.cpp) against PyTorch's `torch.distributed.pipelining` schedules
(tests/reference/torch_pipeline.py): same model split, weights, batches, optimizer, Gloo backend and threads per
rank; prints tokens/s of both, the ratio dtlab/PyTorch (target >= 1.0 for 1f1b and interleaved at pp 2) and the
step-by-step loss agreement, and records it in results/peer/pipeline_vs_pytorch.json. See docs/peer-comparison.md.

    ~/.cache/dtlab/venv/bin/python tests/reference/compare_pipeline.py [--world-size 2] [--schedule 1f1b]
        [--virtual 1] [--repeats 3] [--correctness-only] [section.key=value ...]

--world-size is the number of stages (parallel.pp; one replica). The default run is tests/reference/peer_ddp.yaml
(`small`, 6 blocks, 30 steps, global batch 8) with train.micro_batch=2: m = 4 micro-batches per step, which every
schedule accepts at pp 2 and pp 4. Phase 1 (correctness on `tiny`, 10 steps; model.n_layers raised to the number
of virtual stages when tiny's 2 blocks are too few) needs every loss within rtol 1.3e-6 / atol 1e-5; phase 2 is
the timed run, the two sides alternating --repeats times (median). The phases, helpers and exit rules are
peer_compare.py's.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from peer_compare import REPO, PeerSpec, main  # noqa: E402

SPEC = PeerSpec(
    prog="compare_pipeline",
    description="dtlab pipeline (parallel.pp) vs torch.distributed.pipelining: throughput and loss agreement",
    peer_script="torch_pipeline.py",
    peer_label="torch pipelining",
    strategy="ddp",
    target_ratio=1.0,
    default_out=os.path.join(REPO, "results", "peer", "pipeline_vs_pytorch.json"),
    default_work=os.path.join(REPO, "build", "peer-work", "pipeline"),  # not under results/: the report reads that
    default_repeats=3,
    report_extra={"peer": "torch.distributed.pipelining"},
    record_measured_steps=True,
    report_max_abs_loss_diff=True,
    pipeline=True,
    pipeline_overrides=("train.micro_batch=2",),
)

if __name__ == "__main__":
    sys.exit(main(SPEC))
