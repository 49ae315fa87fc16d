#!/usr/bin/env python3
"""check_tools.py: reads a dtlab run with the tools users already have and checks the numbers against dtlab's own.

    python check_tools.py tensorboard RUN_DIR   TensorBoard's EventAccumulator reads <run>/tensorboard/rank<r>/: every
                                                scalar equals the step line it came from (rank<r>/steps.jsonl)
    python check_tools.py hta RUN_DIR TOL_PP    Holistic Trace Analysis loads every rank's trace.json.gz: temporal
                                                breakdown per rank, and its communication/computation overlap within
                                                TOL_PP percentage points of result.json comm.ranks[r].overlap_pct;
                                                the merged trace (dtlab trace merge) loads too
    python check_tools.py perfetto RUN_DIR      Perfetto's trace processor: slices per thread track (SQL) equal the
                                                trace's complete events per lane
    python check_tools.py csv CSV_DIR RUN_DIR   pandas reads `dtlab export csv`: steps, summary and collectives
                                                equal the run's steps.jsonl, result.json summary and comm.records

Exit 0: agreed (one line per check printed). 1: a mismatch, printed. 77: the tool is not installed (reason printed).
HTA knows communication only by NCCL's kernel names (hta.utils.utils.NCCL_KERNEL_RE); on a CPU run dtlab's
collective lanes (threads named "collectives <group>") hold Gloo collectives with the lab's own names
("grads-all-reduce ddp.bucket.0"), so that one pattern is widened to the names found on those lanes here.
Everything else (parsing, merging intervals, the overlap sweep) is HTA's own code.
"""
import glob
import gzip
import json
import math
import os
import re
import shutil
import sys
import tempfile

SKIP = 77


def fail(message):
    print("MISMATCH: " + message)
    sys.exit(1)


def rank_dirs(run):
    dirs = sorted(glob.glob(os.path.join(run, "rank*")), key=lambda d: int(re.sub(r"\D", "", os.path.basename(d))))
    if not dirs:
        fail(f"{run} has no rank<r>/ directories")
    return dirs


def step_lines(rank_dir):
    with open(os.path.join(rank_dir, "steps.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def close(a, b, rel):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-30)


# --- TensorBoard ------------------------------------------------------------------------------------------------
TAGS = {  # TensorBoard tag -> step line key (lab/train/run_record.cpp write_tensorboard_step)
    "train/loss": "loss", "train/lr": "lr", "train/grad_norm": "grad_norm", "perf/step_ms": "step_ms",
    "perf/tokens_per_s": "tokens_per_s", "perf/mfu_pct": "mfu_pct", "memory/tensor_peak_bytes": "tensor_peak_bytes",
    "comm/comm_ms": "comm_ms", "comm/exposed_comm_ms": "exposed_comm_ms", "comm/overlap_pct": "overlap_pct",
}


def check_tensorboard(run):
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError as e:
        print(f"SKIP: the tensorboard package is not in the venv ({e}); make setup installs it")
        sys.exit(SKIP)
    checked = 0
    for rank_dir in rank_dirs(run):
        rank = os.path.basename(rank_dir)
        tb_dir = os.path.join(run, "tensorboard", rank)
        if not glob.glob(os.path.join(tb_dir, "events.out.tfevents.*")):
            fail(f"no events file in {tb_dir}")
        acc = EventAccumulator(tb_dir, size_guidance={"scalars": 0})
        acc.Reload()
        tags = set(acc.Tags()["scalars"])
        lines = step_lines(rank_dir)
        for tag, key in TAGS.items():
            expected = {s["step"]: s[key] for s in lines if isinstance(s.get(key), (int, float))}
            if not expected:
                continue
            if tag not in tags:
                fail(f"{rank}: tag {tag} missing (tags: {sorted(tags)})")
            got = {e.step: e.value for e in acc.Scalars(tag)}
            if sorted(got) != sorted(expected):
                fail(f"{rank} {tag}: steps {sorted(got)} != steps.jsonl's {sorted(expected)}")
            for step, value in expected.items():
                # TensorBoard's simple_value is a float32: equal to the float32 rounding of dtlab's double.
                if not close(got[step], value, 1e-6) and not (math.isnan(got[step]) and math.isnan(value)):
                    fail(f"{rank} {tag} step {step}: TensorBoard {got[step]!r} != steps.jsonl {value!r}")
                checked += 1
    print(f"tensorboard: {checked} scalars read back equal to the step lines")


# --- Holistic Trace Analysis -------------------------------------------------------------------------------------
def check_hta(run, tolerance_pp):
    try:
        import hta.utils.utils as hta_utils
        from hta.trace_analysis import TraceAnalysis
    except ImportError as e:
        print(f"SKIP: HolisticTraceAnalysis is not in the venv ({e}); make setup installs it")
        sys.exit(SKIP)
    # The one adaptation: the names on dtlab's collective lanes count as communication kernels (module docstring).
    with open(os.path.join(run, "result.json")) as f:
        result = json.load(f)
    files = {int(re.sub(r"\D", "", os.path.basename(d))): os.path.join(d, "trace.json.gz") for d in rank_dirs(run)}
    comm_names = set()
    for path in files.values():
        with gzip.open(path, "rt") as f:
            events = json.load(f)["traceEvents"]
        lanes = {e["tid"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"
                 and e["args"]["name"].startswith("collectives ")}
        comm_names |= {e["name"] for e in events if e.get("ph") == "X" and e["tid"] in lanes}
    if not comm_names:
        fail("the traces have no collective lane")
    hta_utils.NCCL_KERNEL_RE = re.compile(r"^nccl.*Kernel|^(" + "|".join(re.escape(n) for n in comm_names) + r")$")

    # Loaded the way HTA users load a job: one directory of trace files, each file's rank read from the file itself.
    trace_dir = tempfile.mkdtemp(prefix="dtlab_hta_")
    for rank, path in files.items():
        shutil.copy(path, os.path.join(trace_dir, f"rank{rank}.trace.json.gz"))
    analysis = TraceAnalysis(trace_dir=trace_dir, include_last_profiler_step=True)
    shutil.rmtree(trace_dir)
    if sorted(analysis.t.get_ranks()) != sorted(files):
        fail(f"HTA read ranks {sorted(analysis.t.get_ranks())} from the files, the run has {sorted(files)}")
    breakdown = analysis.get_temporal_breakdown(visualize=False)
    for _, row in breakdown.iterrows():
        if not (row["compute_time(us)"] > 0 and row["kernel_time(us)"] > 0):
            fail(f"HTA temporal breakdown of rank {row['rank']} is empty: {row.to_dict()}")
    overlap = analysis.get_comm_comp_overlap(visualize=False)
    dtlab = {r["rank"]: r["overlap_pct"] for r in result["comm"]["ranks"]}
    for _, row in overlap.iterrows():
        rank = int(row["rank"])
        hta_pct = float(row["comp_comm_overlap_pctg"])  # HTA rounds it to 2 decimals
        if abs(hta_pct - dtlab[rank]) > tolerance_pp:
            fail(f"rank {rank}: HTA overlap {hta_pct:.3f}% vs dtlab {dtlab[rank]:.3f}% (tolerance {tolerance_pp} pp)")
        print(f"hta: rank {rank}: overlap {hta_pct:.3f}% (dtlab {dtlab[rank]:.3f}%), compute "
              f"{breakdown.set_index('rank').loc[rank, 'compute_time_pctg']}% of its kernel time")
    merged = os.path.join(run, "merged.trace.json.gz")
    if os.path.exists(merged):
        one = TraceAnalysis(trace_files={0: merged}, trace_dir=run, include_last_profiler_step=True)
        if one.get_temporal_breakdown(visualize=False).empty:
            fail("HTA could not break down the merged trace")
        print("hta: the merged trace loads as one rank")


# --- Perfetto ----------------------------------------------------------------------------------------------------
def trace_processor_shell():
    return os.environ.get("PERFETTO_TP_SHELL") or shutil.which("trace_processor_shell") or shutil.which(
        "trace_processor")


def check_perfetto(run):
    try:
        from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig
    except ImportError as e:
        print(f"SKIP: the perfetto package is not in the venv ({e}); make setup installs it")
        sys.exit(SKIP)
    shell = trace_processor_shell()
    if not shell:
        print("SKIP: no trace_processor_shell binary: the perfetto package downloads it from "
              "commondatastorage.googleapis.com on first use, which this machine cannot reach, and neither Debian "
              "nor PyPI ships it; put it on PATH or set PERFETTO_TP_SHELL to run this check")
        sys.exit(SKIP)
    for rank_dir in rank_dirs(run):
        path = os.path.join(rank_dir, "trace.json.gz")
        with gzip.open(path, "rt") as f:
            events = json.load(f)["traceEvents"]
        names = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
        expected = {}
        for e in events:
            if e.get("ph") == "X":
                expected[names[e["tid"]]] = expected.get(names[e["tid"]], 0) + 1
        tp = TraceProcessor(trace=path, config=TraceProcessorConfig(bin_path=shell))
        rows = tp.query("select thread.name as lane, count(*) as n from slice join thread_track "
                        "on slice.track_id = thread_track.id join thread using (utid) group by thread.name")
        got = {r.lane: r.n for r in rows}
        tp.close()
        if got != expected:
            fail(f"{path}: Perfetto slices per lane {got} != the trace's complete events {expected}")
        print(f"perfetto: {os.path.basename(rank_dir)}: {sum(got.values())} slices on {len(got)} lanes")


# --- CSV ---------------------------------------------------------------------------------------------------------
def check_csv(csv_dir, run):
    try:
        import pandas as pd
    except ImportError as e:
        print(f"SKIP: pandas is not in the venv ({e})")
        sys.exit(SKIP)
    steps = pd.read_csv(os.path.join(csv_dir, "steps.csv"), float_precision="round_trip")
    summary = pd.read_csv(os.path.join(csv_dir, "summary.csv"), float_precision="round_trip")
    collectives = pd.read_csv(os.path.join(csv_dir, "collectives.csv"), float_precision="round_trip")
    with open(os.path.join(run, "result.json")) as f:
        result = json.load(f)
    n = 0
    for rank_dir in rank_dirs(run):
        rank = int(re.sub(r"\D", "", os.path.basename(rank_dir)))
        rows = steps[steps["rank"] == rank].set_index("step")
        lines = step_lines(rank_dir)
        if len(rows) != len(lines):
            fail(f"steps.csv has {len(rows)} rows of rank {rank}, its steps.jsonl {len(lines)}")
        for line in lines:
            for key in ("loss", "lr", "step_ms", "tokens_per_s", "exposed_comm_ms", "overlap_pct"):
                if line[key] != rows.loc[line["step"], key]:  # exact: CSV numbers are written as JSON writes them
                    fail(f"steps.csv rank {rank} step {line['step']} {key}: {rows.loc[line['step'], key]!r} != "
                         f"{line[key]!r}")
                n += 1
            if line["phases_ms"]["forward"] != rows.loc[line["step"], "phases_ms.forward"]:
                fail(f"steps.csv rank {rank} step {line['step']}: phases_ms.forward differs")
    if len(summary) != 1:
        fail(f"summary.csv has {len(summary)} rows for one run")
    for key, value in result["summary"].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if summary.loc[0, "summary." + key] != value:
                fail(f"summary.csv summary.{key}: {summary.loc[0, 'summary.' + key]!r} != result.json {value!r}")
            n += 1
    records = result["comm"]["records"]
    if len(collectives) != len(records):
        fail(f"collectives.csv has {len(collectives)} rows, result.json comm.records {len(records)}")
    for i, rec in enumerate(records):
        for key in ("op", "tag", "bytes", "time_us", "exposed_us"):
            if collectives.loc[i, key] != rec[key]:
                fail(f"collectives.csv row {i} {key}: {collectives.loc[i, key]!r} != {rec[key]!r}")
            n += 1
    print(f"csv: {n} values read back by pandas equal to the run's own")


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        sys.exit(2)
    tool = sys.argv[1]
    if tool == "tensorboard":
        check_tensorboard(sys.argv[2])
    elif tool == "hta":
        check_hta(sys.argv[2], float(sys.argv[3]))
    elif tool == "perfetto":
        check_perfetto(sys.argv[2])
    elif tool == "csv":
        check_csv(sys.argv[2], sys.argv[3])
    else:
        print(f"unknown tool {tool!r}")
        sys.exit(2)


if __name__ == "__main__":
    main()
