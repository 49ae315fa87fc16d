#!/usr/bin/env python3
"""kernel_time.py: where one rank's GPU time goes, from a run's trace (instrument.trace=true on a GPU: CUPTI kernel,
memcpy and memset records on the lab clock, beside the ProfilerStep#N spans).

  python3 tests/gpu/kernel_time.py RUN_DIR [--skip-steps 4] [--top 15]

For the steps after --skip-steps: each step's wall time, the time some kernel, copy or memset ran (the union of their
intervals: the device was busy), the idle rest (the device waited for the host: launches, syncs, host work), and the
kernels that took the most device time, grouped by name (template arguments cut off), with their count per step.
"""
import argparse
import gzip
import json
import os
import re
import sys
from collections import defaultdict

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def load(run_dir):
    path = os.path.join(run_dir, "rank0", "trace.json.gz")
    if not os.path.exists(path):
        sys.exit(f"kernel_time: {path} not found (run with instrument.trace=true)")
    doc = json.load(gzip.open(path))
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def short(name):
    name = name.replace("(anonymous namespace)::", "")
    name = re.sub(r"<.*", "", name)  # template arguments
    name = re.sub(r"\(.*", "", name)  # parameter lists
    return name.split("::")[-1][:70] or "?"


def union_us(spans):
    total, end = 0.0, None
    for start, stop in sorted(spans):
        if end is None or start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--skip-steps", type=int, default=4)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    events = load(args.run_dir)
    steps = sorted((e for e in events if e.get("name", "").startswith("ProfilerStep#")), key=lambda e: e["ts"])
    steps = steps[args.skip_steps:]
    if not steps:
        sys.exit("kernel_time: no steps after --skip-steps in the trace")
    device = [e for e in events if e.get("cat") in DEVICE_CATS and e.get("ph") == "X"]
    if not device:
        sys.exit("kernel_time: no CUPTI records in the trace (a CPU run, or instrument.cupti=off)")
    by_name = defaultdict(lambda: [0.0, 0])
    wall = busy = 0.0
    for step in steps:
        lo, hi = step["ts"], step["ts"] + step["dur"]
        inside = [e for e in device if lo <= e["ts"] < hi]
        wall += step["dur"]
        busy += union_us([(e["ts"], min(hi, e["ts"] + e["dur"])) for e in inside])
        for e in inside:
            key = (e["cat"], short(e["name"]))
            by_name[key][0] += e["dur"]
            by_name[key][1] += 1
    n = len(steps)
    print(f"{n} steps: wall {wall / n / 1e3:.1f} ms per step, device busy {busy / n / 1e3:.1f} ms "
          f"({100 * busy / wall:.0f}%), idle {(wall - busy) / n / 1e3:.1f} ms")
    kernel_total = sum(v[0] for v in by_name.values())
    print(f"{'device time per step (ms)':>26}  {'share':>6}  {'calls/step':>10}  kind / name")
    for (cat, name), (us, count) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[: args.top]:
        print(f"{us / n / 1e3:26.2f}  {100 * us / kernel_total:5.1f}%  {count / n:10.0f}  {cat} {name}")
    print(f"{'':>26}  {'':>6}  {sum(v[1] for v in by_name.values()) / n:10.0f}  records per step in all")


if __name__ == "__main__":
    main()
